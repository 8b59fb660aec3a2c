"""Wheels: the fork wheel from the pristine one (``build``), trimmed copies for the slim bundle
(``trim``), and the archive members both write and check (``archive``: RECORD, fixed timestamps)."""

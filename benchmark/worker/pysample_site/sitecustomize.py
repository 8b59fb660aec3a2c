"""Starts ``fastpath_pysample`` in every Python process that has this folder on its path."""

import fastpath_pysample

fastpath_pysample.start_if_enabled()

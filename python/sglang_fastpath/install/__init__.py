"""The one installer of the fork (verbs ``install`` and ``lock``): a wheelhouse over the dependency
lock or over lmsysorg (``wheelhouse``), the offline bundle (``bundle``), both through one probe and
one pip call (``target``); ``lock`` writes and reads ``docker/lock/<tag>.txt``. Standard-library
imports only (and nothing imported here): ``python -m sglang_fastpath.install`` runs in a bare
environment."""

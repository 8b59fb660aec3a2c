#!/usr/bin/env bash
# Install the fork's wheelhouse into a Python environment and verify it.
# The Dockerfile runs this script, and test/test_docker.py runs it in a fresh venv:
# one code path (python/sglang_fastpath/install.py) for the image and for CI.
#
# Usage: docker/install.sh --mode full|overlay [--python PY] WHEELHOUSE
#   full     no sglang yet: the locked dependencies (docker/lock/<tag>.txt) + the fork wheels
#   overlay  sglang 0.5.17 and its dependencies present (lmsysorg/sglang): replace sglang only
# PY defaults to $PYTHON, else python3 on PATH. Exit: 0 ok, 1 verification failed, 2 usage.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
# The installer runs from this checkout's source: the environment may not have it yet.
PYTHONPATH="$HERE/../python" exec "$PYTHON" -m sglang_fastpath.install --lock-dir "$HERE/lock" "$@"

#!/usr/bin/env bash
# Install the fork's wheelhouse into a Python environment and verify it: `sglang-fastpath install`
# (python/sglang_fastpath/install/, the project's one installer) run from this checkout, for an
# environment that has nothing yet. The Dockerfile runs this script, and so does demo.sh, which CI
# runs in a fresh venv (test/test_docker.py): one code path for the image, the main job and CI.
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

#!/usr/bin/env bash
# The CPU test suite on a fresh machine: a virtual environment with what the tests
# need (torch is the CPU build), the sglang-fastpath package, then pytest.
# GPU tests are collected and reported as skipped. Usage: bash test/run_cpu.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${SGLANG_FASTPATH_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r test/requirements-cpu.txt -e python
exec "$venv/bin/python" -m pytest "$@"

#!/usr/bin/env bash
# Build the fork's wheelhouse into OUT: sglang-0.5.17+fastpath.N for one Python tag
# (the pinned PyPI wheel, sha256-checked, plus patches/series) and the sglang-fastpath
# tooling wheel. The Dockerfile's "wheels" stage and test/test_docker.py both run it.
#
# Usage: docker/build-wheels.sh OUT [PYTHON_TAG]   (default tag cp312; needs git and the package index)
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 OUT [PYTHON_TAG]" >&2
  exit 2
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$1"
TAG="${2:-cp312}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$OUT"
# The tooling wheel and its requirements (packaging), built into a scratch folder: the wheel verb
# imports them, and a bare Python (the Dockerfile's python:3.12-slim) has nothing but pip.
tools="$(mktemp -d)"
trap 'rm -rf "$tools"' EXIT
"$PYTHON" -m pip wheel --disable-pip-version-check --quiet --wheel-dir "$tools" "$ROOT/python"
cp "$tools"/sglang_fastpath-*.whl "$OUT"/
requirements="$(find "$tools" -name '*.whl' ! -name 'sglang_fastpath-*' -printf '%p:')"
SGLANG_FASTPATH_ROOT="$ROOT" PYTHONPATH="$ROOT/python:$requirements" "$PYTHON" -m sglang_fastpath wheel --out "$OUT" --tag "$TAG"
ls -1 "$OUT"

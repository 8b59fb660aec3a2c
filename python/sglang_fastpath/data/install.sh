#!/usr/bin/env bash
# Offline installer of an sglang-fastpath bundle (written by 'sglang-fastpath bundle').
#
#   bash install.sh [--stock] [--cross] [--no-jit-cache] SITE
#                  install every wheel of the bundle into the folder SITE (pip --target), then:
#                  export PYTHONPATH=SITE
#   bash install.sh [--stock] [--no-jit-cache] --env
#                  install into the environment of $PYTHON instead
#
# --stock  afterwards turn the patched sglang back into pristine SGLang (the base release): the
#          files the patch series changes are replaced by stock-overlay/files/, the files it adds
#          (stock-overlay/REMOVE) are deleted, and the dist-info says the base version (with a
#          STOCK marker). A benchmark builds both sites from one bundle:
#              bash install.sh /tmp/site-fork && bash install.sh --stock /tmp/site-stock
# --cross  allow a Python other than the bundle's: pip installs the wheels by their tags and
#          nothing is imported (CI checks the install path this way on another Python).
# --no-jit-cache  do not seed the JIT cache. By default a bundle made with --jit-cache copies its
#          prebuilt SGLang kernels (jit-cache/) into ${TVM_FFI_CACHE_DIR:-~/.cache/tvm-ffi}, never
#          over a file already there, so SGLang skips their nvcc build (minutes) on first use; a
#          failure to seed is only a warning.
#
# Never uses the network: every file is first checked against SHA256SUMS, then pip runs with
# --no-index, no pip config files and only this bundle's wheels, with --no-deps: the bundle
# holds exactly what the host lacks (manifest.json: "left_to_host", "not_shipped"). The work is
# done by 'sglang-fastpath install --mode bundle', run from the bundle's own sglang_fastpath wheel
# (the one installer of the project). Env: PYTHON (default python3), TVM_FFI_CACHE_DIR.
# Exit: 0 installed and verified, 1 a file differs from SHA256SUMS or the result is wrong, 2 usage.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${PYTHON:-python3}
args=(--mode bundle "$HERE" --python "$PY")
site=""
while [ $# -gt 0 ]; do
  case "$1" in
    --stock | --cross | --env | --no-jit-cache) args+=("$1") ;;
    -h | --help) sed -n '2,27p' "$0"; exit 0 ;;
    -*) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [ -z "$site" ] || { echo "install.sh: give one SITE folder, not '$site' and '$1'" >&2; exit 2; }
       site=$1; args+=(--site "$1") ;;
  esac
  shift
done
tools=("$HERE"/wheels/sglang_fastpath-*.whl)
[ -f "${tools[0]}" ] || { echo "install.sh: no sglang_fastpath wheel in $HERE/wheels: copy the bundle again" >&2; exit 1; }
PYTHONPATH="${tools[0]}" exec "$PY" -m sglang_fastpath.install "${args[@]}"

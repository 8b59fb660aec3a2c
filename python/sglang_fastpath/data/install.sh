#!/usr/bin/env bash
# Offline installer of an sglang-fastpath bundle (written by 'sglang-fastpath bundle').
#
#   bash install.sh [--stock] [--cross] SITE   install every wheel of the bundle into the folder
#                                               SITE (pip --target), then: export PYTHONPATH=SITE
#   bash install.sh [--stock] --env             install into the environment of $PYTHON instead
#
# --stock  afterwards turn the patched sglang back into pristine SGLang @BASE_VERSION@: the files
#          the patch series changes are replaced by stock-overlay/files/, the files it adds
#          (stock-overlay/REMOVE) are deleted, and the dist-info says @BASE_VERSION@ (with a
#          STOCK marker). A benchmark builds both sites from one bundle:
#              bash install.sh /tmp/site-fork && bash install.sh --stock /tmp/site-stock
# --cross  allow a Python other than @PYTHON@: pip installs the cp@PYTAG@ wheels by their tags and
#          nothing is imported (CI checks the install path this way on another Python).
#
# Never uses the network: the wheels are first checked against SHA256SUMS, then pip runs
# with --no-index, no pip config files and only this bundle's wheels, with --no-deps: the
# bundle holds exactly what the host lacks (manifest.json: "left_to_host", "not_shipped").
# Env: PYTHON (default python3).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${PYTHON:-python3}
STOCK=0 CROSS=0 ENV=0 SITE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --stock) STOCK=1 ;;
    --cross) CROSS=1 ;;
    --env) ENV=1 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    -*) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [ -z "$SITE" ] || { echo "install.sh: give one SITE folder, not '$SITE' and '$1'" >&2; exit 2; }
       SITE=$1 ;;
  esac
  shift
done
if [ "$ENV" = 1 ] && { [ -n "$SITE" ] || [ "$CROSS" = 1 ]; }; then
  echo "install.sh: --env installs into $PY's environment: give no SITE and no --cross" >&2; exit 2
fi
[ "$ENV" = 1 ] || [ -n "$SITE" ] || { echo "usage: install.sh [--stock] [--cross] SITE | install.sh [--stock] --env" >&2; exit 2; }
have=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$have" != "@PYTHON@" ] && [ "$CROSS" = 0 ]; then
  echo "install.sh: this bundle is for Python @PYTHON@ but $PY is $have (--cross installs without importing)" >&2; exit 2
fi
(cd "$HERE" && sha256sum --quiet -c SHA256SUMS) || { echo "install.sh: bundle files differ from SHA256SUMS: copy the bundle again" >&2; exit 1; }

args=(install --no-index --find-links "$HERE/wheels" --no-deps --no-compile --no-cache-dir
      --disable-pip-version-check --root-user-action=ignore --only-binary=:all: -q)
if [ "$ENV" = 1 ]; then
  DEST=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
else
  mkdir -p "$SITE"; DEST=$(cd "$SITE" && pwd)
  args+=(--target "$DEST" --upgrade @PIP_TARGET_ARGS@)
fi
PIP_CONFIG_FILE=/dev/null "$PY" -m pip "${args[@]}" "$HERE"/wheels/*.whl

if [ "$STOCK" = 1 ]; then
  if [ -d "$HERE/stock-overlay/files" ]; then cp -R "$HERE/stock-overlay/files/." "$DEST/"; fi
  if [ -f "$HERE/stock-overlay/REMOVE" ]; then
    while IFS= read -r f; do [ -z "$f" ] || rm -f "$DEST/$f"; done < "$HERE/stock-overlay/REMOVE"
  fi
  info="$DEST/sglang-@FORK_VERSION@.dist-info"; stock="$DEST/sglang-@BASE_VERSION@.dist-info"
  sed -i 's/^Version: .*/Version: @BASE_VERSION@/' "$info/METADATA"
  echo "pristine SGLang @BASE_VERSION@: sglang-fastpath bundle stock overlay over @FORK_VERSION@" > "$info/STOCK"
  rm -rf "$stock"; mv "$info" "$stock"
  find "$DEST/sglang" -name __pycache__ -type d -prune -exec rm -rf {} +
fi

# sgl_kernel loads sm90/common_ops on compute capability 9.0 and sm100/common_ops on any other GPU.
if [ -d "$DEST/sgl_kernel" ] && command -v nvidia-smi > /dev/null 2>&1; then
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | head -n 1 || true)
  if [ -n "$cc" ]; then
    [ "$cc" = "9.0" ] && ops=sm90 || ops=sm100
    ls "$DEST/sgl_kernel/$ops"/common_ops.* > /dev/null 2>&1 ||
      echo "install.sh: WARNING: this GPU (compute capability $cc) loads sgl_kernel/$ops/common_ops, which this bundle left out (rebuild with 'sglang-fastpath bundle --arch')" >&2
  fi
fi
echo "install.sh: $(ls "$HERE"/wheels/*.whl | wc -l) wheels installed into $DEST ($([ "$STOCK" = 1 ] && echo "stock @BASE_VERSION@" || echo "@FORK_VERSION@"))"

#!/usr/bin/env bash
# The README's main job from a fresh clone, in one command. It makes a virtual environment with
# the locked dependencies (CUDA torch 2.11) and the patched SGLang wheel, installed by the same
# code as the Docker image and CI (docker/build-wheels.sh, docker/install.sh --mode full). Then
# it serves the embedded tiny target + EAGLE-3 draft with
# `python -m sglang.launch_server --speculative-algorithm EAGLE3`, sends one request, and prints
# the answer and the accept length (`sglang-fastpath demo`). A second run reuses the environment.
# Without a GPU it stops after the install and says what it verified.
#
# On an air-gapped host, give it the offline bundle (`sglang-fastpath bundle --out DIR`, made on a
# host with network): the host's Python and torch stay, the bundle's wheels go into a site folder
# through the same installer (`sglang-fastpath install --mode bundle`, what the bundle's install.sh
# runs), and the demo runs with that folder on PYTHONPATH.
#
# Usage: bash demo.sh [--bundle DIR] [sglang-fastpath demo arguments, e.g. --log server.log]
# Environment:
#   SGLANG_FASTPATH_BUNDLE       the offline bundle's folder, as --bundle (default: none, install from PyPI)
#   SGLANG_FASTPATH_ENV          the environment's folder (default .venv-demo; with a bundle, its site .site-demo)
#   SGLANG_FASTPATH_PYTHON       a Python 3.12 or 3.11 with venv (default: the first found, 3.12 first);
#                                with a bundle, the host's Python of the bundle's version (default python3, python3.12)
#   SGLANG_FASTPATH_MIN_FREE_GB  free disk the install needs where the environment goes (default 20; with a bundle 2)
#   SGLANG_FASTPATH_NVIDIA_SMI   the nvidia-smi to ask for the driver and GPUs (default nvidia-smi)
# Exit: 0 answered (without a GPU: installed and verified), 2 a precondition failed (one line
# says which and what to do, before anything large is downloaded), else the failing step's status.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
BUNDLE=${SGLANG_FASTPATH_BUNDLE:-}
if [ "${1:-}" = "--bundle" ]; then
  [ $# -ge 2 ] || { echo "demo.sh: --bundle needs the bundle's folder" >&2; exit 2; }
  BUNDLE=$2
  shift 2
fi
if [ -n "$BUNDLE" ]; then
  ENV_DIR=${SGLANG_FASTPATH_ENV:-.site-demo}
  MIN_FREE_GB=${SGLANG_FASTPATH_MIN_FREE_GB:-2}
else
  ENV_DIR=${SGLANG_FASTPATH_ENV:-.venv-demo}
  MIN_FREE_GB=${SGLANG_FASTPATH_MIN_FREE_GB:-20}
fi
NVIDIA_SMI=${SGLANG_FASTPATH_NVIDIA_SMI:-nvidia-smi}
MIN_DRIVER=580 # the oldest Linux driver for CUDA 13.0, which torch 2.11's locked build uses

say() { echo "demo.sh: $*" >&2; }
die() {
  say "$*"
  exit 2
}

# A Python whose tag has a dependency lock (docker/lock/cp312.txt, cp311.txt) and that can make a venv.
find_python() {
  local candidate tag
  for candidate in ${SGLANG_FASTPATH_PYTHON:-python3.12 $HOME/.pyenv/versions/3.12*/bin/python3.12 python3.11 python3 $HOME/.pyenv/versions/3.11*/bin/python3.11}; do
    tag=$("$candidate" -c 'import sys, venv, ensurepip; print("cp%d%d" % sys.version_info[:2])' 2>/dev/null) || continue
    if [ -f "docker/lock/$tag.txt" ]; then
      echo "$candidate $tag"
      return 0
    fi
  done
  return 1
}

# One field of the bundle's manifest.json (a dotted path; empty when absent), read with the Python $1.
manifest() {
  "$1" -c 'import json, sys
value = json.load(open(sys.argv[1]))
for key in sys.argv[2].split("."):
    value = value.get(key, "") if isinstance(value, dict) else ""
print(value)' "$BUNDLE/manifest.json" "$2"
}

# The host's Python of the bundle's version (it has torch: the bundle leaves torch to the host).
find_bundle_python() {
  local candidate want="" have
  for candidate in ${SGLANG_FASTPATH_PYTHON:-python3 python3.12}; do
    have=$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || continue
    want=$(manifest "$candidate" target.python)
    if [ "$have" = "$want" ]; then
      echo "$candidate cp${want/./}"
      return 0
    fi
  done
  echo "none ${want:-of the bundle}"
}

# Echo the number of GPUs (0 without nvidia-smi); refuse a missing or too old driver.
check_driver() {
  if ! command -v "$NVIDIA_SMI" >/dev/null 2>&1; then
    echo 0
    return 0
  fi
  local out driver
  if ! out=$("$NVIDIA_SMI" --query-gpu=driver_version --format=csv,noheader 2>&1) || [ -z "$out" ]; then
    die "$NVIDIA_SMI is here but no CUDA driver answers ($(echo "$out" | head -n 1)): install or load the NVIDIA driver ($MIN_DRIVER or newer)"
  fi
  driver=$(echo "$out" | head -n 1 | tr -d ' ')
  if ! [[ "${driver%%.*}" =~ ^[0-9]+$ ]]; then
    die "$NVIDIA_SMI reports driver version '$driver', which is not a version: check the NVIDIA driver install"
  fi
  if [ "${driver%%.*}" -lt "$MIN_DRIVER" ]; then
    die "NVIDIA driver $driver is older than $MIN_DRIVER, which torch 2.11's CUDA 13 build needs: upgrade the driver"
  fi
  echo "$out" | grep -c .
}

# The installed sglang's version when it is the fork (its fastpath.json is there), else nothing.
installed_fork() {
  [ -x "$ENV_DIR/bin/python" ] || return 0
  "$ENV_DIR/bin/python" -c '
from importlib import metadata
try:
    dist = metadata.distribution("sglang")
    print(dist.version if dist.read_text("fastpath.json") else "")
except metadata.PackageNotFoundError:
    pass' 2>/dev/null || true
}

# Refuse too little free disk where the environment goes (NEEDS: what the install takes).
check_disk() {
  local parent free_gb
  parent=$(dirname "$ENV_DIR")
  free_gb=$(($(df -Pk "$parent" | awk 'NR == 2 {print $4}') / 1024 / 1024))
  if [ "$free_gb" -lt "$MIN_FREE_GB" ]; then
    die "$free_gb GB free in $parent, the install needs $MIN_FREE_GB GB ($1): free some, or set SGLANG_FASTPATH_ENV to a larger disk"
  fi
}

# The offline bundle into the site folder $ENV_DIR with the host's Python; then the demo, or the no-GPU stop.
bundle_main() {
  [ -f "$BUNDLE/manifest.json" ] && [ -f "$BUNDLE/SHA256SUMS" ] ||
    die "no offline bundle at $BUNDLE (manifest.json, SHA256SUMS): make one on a host with network with 'sglang-fastpath bundle --out DIR' and copy DIR here"
  local py tag gpus fork sig torch want_torch verified site
  read -r py tag < <(find_bundle_python)
  [ "$py" != none ] ||
    die "the bundle is for Python ${tag#cp}, and no ${SGLANG_FASTPATH_PYTHON:-python3 or python3.12} here is: name the host's Python $tag (the one with torch) in SGLANG_FASTPATH_PYTHON"
  gpus=$(check_driver) || exit $?
  want_torch=$(manifest "$py" left_to_host.torch)
  if [ "$gpus" -gt 0 ] && [ -n "$want_torch" ]; then
    torch=$("$py" -c 'from importlib.metadata import version; print(version("torch"))' 2>/dev/null) ||
      die "$py has no torch, which the bundle leaves to the host (torch $want_torch): install it, or name the Python that has it in SGLANG_FASTPATH_PYTHON"
    [ "${torch%.*}" = "${want_torch%.*}" ] || [ "${torch%%+*}" = "$want_torch" ] ||
      die "$py has torch $torch, the bundle was made for the host's torch $want_torch: use that host's Python, or make the bundle with --host-manifest for this one"
  fi
  fork=$(manifest "$py" sglang.version)
  sig=$(sha256sum "$BUNDLE/SHA256SUMS" | cut -c1-16)
  verified="verified (the bundle's SHA256SUMS, every wheel's version in the site, the fork's fastpath.json)"
  if [ "$(cat "$ENV_DIR/.bundle" 2>/dev/null)" = "$sig" ]; then
    say "reusing $ENV_DIR (sglang $fork from bundle $sig)"
    verified="verified when it was installed (the bundle's SHA256SUMS, every wheel's version in the site, the fork's fastpath.json)"
  else
    check_disk "the bundle's wheels unpacked"
    say "installing sglang $fork from the offline bundle $BUNDLE into $ENV_DIR for $py ($tag); no network"
    rm -rf "$ENV_DIR"
    PYTHONPATH=python "$py" -m sglang_fastpath.install --mode bundle "$BUNDLE" --python "$py" --site "$ENV_DIR" >&2
    echo "$sig" >"$ENV_DIR/.bundle"
  fi
  if [ "$gpus" -eq 0 ]; then
    say "no GPU here ($NVIDIA_SMI not found): sglang $fork is installed from the bundle in $ENV_DIR and $verified; the EAGLE-3 demo needs a GPU, so it stops here"
    exit 0
  fi
  # An air-gapped host: no hub lookups. The slim bundle ships flashinfer without its JIT sources.
  site=$(cd "$ENV_DIR" && pwd)
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  if [ "$(manifest "$py" profile)" = slim ]; then
    export SGLANG_IS_FLASHINFER_AVAILABLE=false
  fi
  exec "$py" -m sglang_fastpath demo "$@"
}

[ -z "$BUNDLE" ] || bundle_main "$@"

read -r PY TAG < <(find_python) ||
  die "no Python 3.12 or 3.11 with venv here (the dependency locks' versions): install python3.12 and python3.12-venv, or name one in SGLANG_FASTPATH_PYTHON"
GPUS=$(check_driver) || exit $?
FORK=$(PYTHONPATH=python "$PY" -c 'from sglang_fastpath.pins import fastpath_version; print(fastpath_version())')

verified="verified (the locked dependencies, pip check, import sglang, the fork's fastpath.json)"
if [ "$(installed_fork)" = "$FORK" ]; then
  say "reusing $ENV_DIR (sglang $FORK)"
  verified="verified when it was installed (the locked dependencies, pip check, import sglang), its fastpath.json now"
else
  check_disk "about 4 GB of downloads, 10 GB installed"
  say "installing sglang $FORK ($TAG, $PY) into $ENV_DIR: about 4 GB from PyPI, once"
  rm -rf "$ENV_DIR"
  "$PY" -m venv "$ENV_DIR"
  # The new environment's pip builds the wheels: a system Python may have none.
  PYTHON="$ENV_DIR/bin/python" bash docker/build-wheels.sh "$ENV_DIR/wheelhouse" "$TAG" >/dev/null
  PYTHON="$PY" bash docker/install.sh --mode full --python "$ENV_DIR/bin/python" "$ENV_DIR/wheelhouse"
fi

if [ "$GPUS" -eq 0 ]; then
  say "no GPU here ($NVIDIA_SMI not found): sglang $FORK is installed in $ENV_DIR and $verified; the EAGLE-3 demo needs a GPU, so it stops here"
  exit 0
fi
exec "$ENV_DIR/bin/python" -m sglang_fastpath demo "$@"

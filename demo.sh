#!/usr/bin/env bash
# The README's main job from a fresh clone, in one command. It makes a virtual environment with
# the locked dependencies (CUDA torch 2.11) and the patched SGLang wheel, installed by the same
# code as the Docker image and CI (docker/build-wheels.sh, docker/install.sh --mode full). Then
# it serves the embedded tiny target + EAGLE-3 draft with
# `python -m sglang.launch_server --speculative-algorithm EAGLE3`, sends one request, and prints
# the answer and the accept length (`sglang-fastpath demo`). A second run reuses the environment.
# Without a GPU it stops after the install and says what it verified.
#
# Usage: bash demo.sh [sglang-fastpath demo arguments, e.g. --log server.log]
# Environment:
#   SGLANG_FASTPATH_ENV          the environment's folder (default .venv-demo)
#   SGLANG_FASTPATH_PYTHON       a Python 3.12 or 3.11 with venv (default: the first found, 3.12 first)
#   SGLANG_FASTPATH_MIN_FREE_GB  free disk the install needs where the environment goes (default 20)
#   SGLANG_FASTPATH_NVIDIA_SMI   the nvidia-smi to ask for the driver and GPUs (default nvidia-smi)
# Exit: 0 answered (without a GPU: installed and verified), 2 a precondition failed (one line
# says which and what to do, before anything large is downloaded), else the failing step's status.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
ENV_DIR=${SGLANG_FASTPATH_ENV:-.venv-demo}
MIN_FREE_GB=${SGLANG_FASTPATH_MIN_FREE_GB:-20}
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

read -r PY TAG < <(find_python) ||
  die "no Python 3.12 or 3.11 with venv here (the dependency locks' versions): install python3.12 and python3.12-venv, or name one in SGLANG_FASTPATH_PYTHON"
GPUS=$(check_driver) || exit $?
FORK=$(PYTHONPATH=python "$PY" -c 'from sglang_fastpath.pins import fastpath_version; print(fastpath_version())')

verified="verified (the locked dependencies, pip check, import sglang, the fork's fastpath.json)"
if [ "$(installed_fork)" = "$FORK" ]; then
  say "reusing $ENV_DIR (sglang $FORK)"
  verified="verified when it was installed (the locked dependencies, pip check, import sglang), its fastpath.json now"
else
  parent=$(dirname "$ENV_DIR")
  free_gb=$(($(df -Pk "$parent" | awk 'NR == 2 {print $4}') / 1024 / 1024))
  if [ "$free_gb" -lt "$MIN_FREE_GB" ]; then
    die "$free_gb GB free in $parent, the install needs $MIN_FREE_GB GB (about 4 GB of downloads, 10 GB installed): free some, or set SGLANG_FASTPATH_ENV to a larger disk"
  fi
  say "installing sglang $FORK ($TAG, $PY) into $ENV_DIR: about 4 GB from PyPI, once"
  rm -rf "$ENV_DIR"
  "$PY" -m venv "$ENV_DIR"
  PYTHON="$PY" bash docker/build-wheels.sh "$ENV_DIR/wheelhouse" "$TAG" >/dev/null
  PYTHON="$PY" bash docker/install.sh --mode full --python "$ENV_DIR/bin/python" "$ENV_DIR/wheelhouse"
fi

if [ "$GPUS" -eq 0 ]; then
  say "no GPU here ($NVIDIA_SMI not found): sglang $FORK is installed in $ENV_DIR and $verified; the EAGLE-3 demo needs a GPU, so it stops here"
  exit 0
fi
exec "$ENV_DIR/bin/python" -m sglang_fastpath demo "$@"

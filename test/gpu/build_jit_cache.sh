#!/usr/bin/env bash
# Builds SGLang's Marlin MoE JIT kernel for a GPU architecture on this CPU machine, into the folder a bundle ships
# with --jit-cache (docs/bundle.md, "JIT kernels"), so a fresh GPU host skips its ~300-s nvcc build:
#
#   bash test/gpu/build_jit_cache.sh [ARCH] [CACHE_DIR]      # defaults: 9.0 (H100/H200), build/cache/jit/sm90
#   sglang-fastpath bundle --out .carry/bundle --profile slim --jit-cache build/cache/jit/sm90
#
# It needs the fork's wheel (.carry/bundle/wheels/sglang-*.whl: build the bundle once without --jit-cache first, or
# set FASTPATH_WHEEL), nvcc (CUDA_HOME, default /usr/local/cuda) and Python 3.11 with the CPU torch 2.13 wheel this
# machine keeps on disk. The build environment (FASTPATH_JIT_ENV, default build/jit-env) is a venv with torch CPU,
# apache-tvm-ffi at the bundle's version (part of the cache folder's name), ninja, what sglang.kernels.ops imports at
# module level, the fork's wheel unzipped into it (its cp312 tag stops pip on 3.11; the kernel sources are the same)
# and a stand-in torchvision (PyPI's fails to import beside torch 2.13 CPU; sglang only imports decode_jpeg from it).
# Seen here: 187 s for --arch 9.0 on 2 cores, plus ~2 min for the environment the first time.
set -euo pipefail
cd "$(dirname "$0")/../.."
ARCH=${1:-9.0}
CACHE=${2:-build/cache/jit/sm${ARCH/./}}
ENV=${FASTPATH_JIT_ENV:-build/jit-env}
PY=${FASTPATH_JIT_PYTHON:-python3.11}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
WHEEL=${FASTPATH_WHEEL:-$( (ls .carry/bundle/wheels/sglang-0.5.17+fastpath*.whl 2>/dev/null || true) | head -1)}
if [ -z "$WHEEL" ] || [ ! -f "$WHEEL" ]; then
  echo "build_jit_cache.sh: no fork wheel (build the bundle first, or set FASTPATH_WHEEL)" >&2; exit 2
fi
[ -x "$CUDA_HOME/bin/nvcc" ] || { echo "build_jit_cache.sh: no nvcc under CUDA_HOME=$CUDA_HOME" >&2; exit 2; }
TVM_FFI=$( (ls .carry/bundle/wheels/apache_tvm_ffi-*.whl 2>/dev/null || true) | head -1)
TVM_FFI=$(basename "${TVM_FFI:-apache_tvm_ffi-0.1.11-}" | cut -d- -f2)

[ -x "$ENV/bin/python" ] || "$PY" -m venv "$ENV"
"$ENV/bin/pip" install -q --find-links /opt/wheels torch==2.13.0 "apache-tvm-ffi==$TVM_FFI" ninja numpy psutil \
  pybase64 triton pillow starlette tqdm aiohttp msgspec orjson requests IPython pydantic
"$ENV/bin/pip" install -q -e python
SITE=$("$ENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
if [ ! -f "$SITE/torchvision/io/__init__.py" ]; then
  mkdir -p "$SITE/torchvision/io"
  echo '__version__ = "0.0.0+stand-in"  # build_jit_cache.sh: sglang imports torchvision.io.decode_jpeg only' \
    > "$SITE/torchvision/__init__.py"
  printf 'def decode_jpeg(*args, **kwargs):\n    raise NotImplementedError("build_jit_cache.sh stand-in")\n' \
    > "$SITE/torchvision/io/__init__.py"
fi
STAMP="$SITE/.fastpath-wheel"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$(sha256sum "$WHEEL" | cut -d' ' -f1)" ]; then
  rm -rf "$SITE/sglang"
  "$ENV/bin/python" -m zipfile -e "$WHEEL" "$SITE"
  sha256sum "$WHEEL" | cut -d' ' -f1 > "$STAMP"
fi
mkdir -p "$CACHE"
CUDA_HOME=$CUDA_HOME PATH="$(realpath "$ENV")/bin:$CUDA_HOME/bin:$PATH" \
  "$ENV/bin/sglang-fastpath" warm-jit --arch "$ARCH" --cache-dir "$(realpath "$CACHE")"
ls "$CACHE"/*/*.so

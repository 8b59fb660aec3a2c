#!/usr/bin/env bash
# The one command to run on a GPU host (the device tool runs it from the repository root):
#
#   bash test/gpu/run_on_device.sh [--preflight] [PYTEST ARGS... | --script FILE.py ARGS...]
#
# 1. Installs the carried bundle into /tmp/site-fork and, through its stock overlay, pristine
#    SGLang 0.5.17 into /tmp/site-stock (skipped when that same bundle is already installed).
#    Build it first, here: sglang-fastpath bundle --out .carry/bundle --profile slim
#    and pass carry [".carry"] to the device tool (.carry/ is git-ignored; slim fits one call).
# 2. Sets what SGLang needs offline on these hosts (below) and PYTHONPATH=python:/tmp/site-fork (the tree's sglang_fastpath first).
# 3. Prints nvidia-smi and the versions, and checks that sglang.srt.entrypoints.engine imports,
#    that sglang's metadata is the fork's and that sgl_kernel loaded the common_ops for this GPU.
# 4. Runs `python3 -m pytest test -m gpu`, or pytest with the given args, or python3 FILE.py ARGS.
#    --preflight stops after step 3.
# Logs go to $OUT (set by the device tool), else .devrun/out. Exit status: step 4's, or 3 when
# the install or the preflight failed.
# Env: FASTPATH_BUNDLE (.carry/bundle), FASTPATH_SITE_FORK (/tmp/site-fork),
#      FASTPATH_SITE_STOCK (/tmp/site-stock), FASTPATH_TIMEOUT (step 4's limit, s; 480).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 3
ROOT=$PWD T0=$(date +%s)
BUNDLE=${FASTPATH_BUNDLE:-.carry/bundle}
FORK=${FASTPATH_SITE_FORK:-/tmp/site-fork} STOCK=${FASTPATH_SITE_STOCK:-/tmp/site-stock}
OUT=${OUT:-$ROOT/.devrun/out}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/run_on_device.log") 2>&1
say() { echo "[run_on_device t=$(( $(date +%s) - T0 ))s] $*"; }
PREFLIGHT=0; [ "${1:-}" = "--preflight" ] && { PREFLIGHT=1; shift; }

# Offline, and NVLink multicast off: mandatory on the shared multi-GPU hosts.
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The slim bundle ships flashinfer without its JIT sources: SGLang must not pick flashinfer.
export SGLANG_IS_FLASHINFER_AVAILABLE=false
# A failed engine otherwise sleeps 60 s for CUDA core dumps nobody collects here.
export SGLANG_CUDA_COREDUMP_BEFORE_CRASH_WAIT_SECS=0
export SGLANG_FASTPATH_SITE_FORK=$FORK SGLANG_FASTPATH_SITE_STOCK=$STOCK

[ -f "$BUNDLE/install.sh" ] || { say "no bundle at $BUNDLE: run 'sglang-fastpath bundle --out .carry/bundle' and carry .carry"; exit 3; }
sig=$(sha256sum "$BUNDLE/SHA256SUMS" | cut -c1-16)
install_site() {  # SITE [--stock]
  local site=$1; shift
  [ "$(cat "$site/.bundle" 2> /dev/null)" = "$sig" ] && { say "$site: bundle $sig already installed"; return 0; }
  rm -rf "$site"
  timeout -k 10 300 bash "$BUNDLE/install.sh" "$@" "$site" && echo "$sig" > "$site/.bundle"
}
install_site "$FORK" || { say "install into $FORK failed"; exit 3; }
install_site "$STOCK" --stock || { say "install into $STOCK failed"; exit 3; }
export PYTHONPATH=$ROOT/python:$FORK${PYTHONPATH:+:$PYTHONPATH}  # this tree's sglang_fastpath before the bundle's copy
say "installed (PYTHONPATH=$PYTHONPATH)"

nvidia-smi || say "nvidia-smi failed"
timeout -k 10 240 python3 - > >(tee "$OUT/versions.txt") 2>&1 << 'PY'
import importlib.metadata as md, os, sys, time
t = time.time()
import torch, triton, transformers, sglang, sgl_kernel
cc = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
print("python", sys.version.split()[0], "| torch", torch.__version__, "cuda", torch.version.cuda,
      "| gpus", torch.cuda.device_count(), torch.cuda.get_device_name(0) if cc else "none", cc)
print("triton", triton.__version__, "| transformers", transformers.__version__, "| sgl_kernel", sgl_kernel.__version__)
print("sglang", sglang.__version__, "metadata", md.version("sglang"), "from", os.path.dirname(sglang.__file__))
print("sgl_kernel common_ops", sgl_kernel.common_ops.__file__)
import sglang.srt.entrypoints.engine  # noqa: F401
print(f"IMPORT_OK sglang.srt.entrypoints.engine ({time.time() - t:.1f}s)")
problems = []
if "+fastpath." not in md.version("sglang"):
    problems.append(f"sglang metadata {md.version('sglang')} is not the fork's")
want = "sm90" if cc == (9, 0) else "sm100"
if cc and f"/{want}/" not in sgl_kernel.common_ops.__file__:
    problems.append(f"sgl_kernel loaded {sgl_kernel.common_ops.__file__}, expected its {want} build")
print("PREFLIGHT_OK" if not problems else "PREFLIGHT_FAILED: " + "; ".join(problems))
sys.exit(1 if problems else 0)
PY
rc=$?
PYTHONPATH=$STOCK timeout -k 5 60 python3 -c 'import importlib.metadata as m; print("stock site: sglang", m.version("sglang"))' || rc=1
[ $rc = 0 ] || { say "preflight failed (rc=$rc)"; exit 3; }
say "preflight ok"
[ "$PREFLIGHT" = 1 ] && exit 0

if [ "${1:-}" = "--script" ]; then
  shift
  [ $# -gt 0 ] || { say "--script needs FILE.py"; exit 3; }
  cmd=(python3 "$@")
else
  [ $# -gt 0 ] || set -- test -m gpu
  cmd=(python3 -m pytest -v -rA --junitxml="$OUT/pytest-junit.xml" "$@")
fi
say "running: ${cmd[*]} (timeout ${FASTPATH_TIMEOUT:-480}s)"
timeout -k 20 "${FASTPATH_TIMEOUT:-480}" "${cmd[@]}"
rc=$?
say "done rc=$rc"
exit $rc

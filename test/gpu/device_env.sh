# Sourced by a device call's script (and by test/gpu/gate.sh), from the repository root, on the GPU
# host: installs the carried bundle and runs the preflight (skipped when FASTPATH_PREFLIGHT_DONE=1,
# which it exports for the scripts it starts), exports the offline/NVLS environment with this tree's
# python/ (sglang_fastpath: the bundle's copy may be older) and then the fork's site
# (FASTPATH_SITE_FORK, /tmp/site-fork) on PYTHONPATH, and defines T0, left SECONDS (time
# left of a SECONDS budget, never past FASTPATH_CALL_LIMIT_S, default 580: a budget past the device
# call's 600-s limit lets a benchmark run until the call is killed, with nothing packed), say
# MESSAGE, and M (where the models are made: SGLANG_FASTPATH_MODELS, /tmp/fastpath-models).
OUT=${OUT:-$PWD/.devrun/out}; mkdir -p "$OUT"  # the device tool sets OUT; elsewhere .devrun/out
T0=$(date +%s)
left() {
  local b=$1 cap=${FASTPATH_CALL_LIMIT_S:-580}
  [ "$b" -gt "$cap" ] && b=$cap
  echo $((b - $(date +%s) + T0))
}
say() { echo "[call t=$(( $(date +%s) - T0 ))s] $*"; }
if [ "${FASTPATH_PREFLIGHT_DONE:-}" != 1 ]; then
  bash test/gpu/run_on_device.sh --preflight > "$OUT/preflight.log" 2>&1 || { tail -30 "$OUT/preflight.log"; exit 3; }
  say "preflight ok"
fi
export FASTPATH_PREFLIGHT_DONE=1
export PYTHONPATH=$PWD/python:${FASTPATH_SITE_FORK:-/tmp/site-fork} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
  NVSHMEM_DISABLE_NVLS=1 SGLANG_IS_FLASHINFER_AVAILABLE=false SGLANG_CUDA_COREDUMP_BEFORE_CRASH_WAIT_SECS=0 \
  SGLANG_FASTPATH_MODELS=${SGLANG_FASTPATH_MODELS:-/tmp/fastpath-models}
M=$SGLANG_FASTPATH_MODELS
mkdir -p "$M"

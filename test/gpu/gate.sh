#!/usr/bin/env bash
# The GPU correctness gate in one device call (nvidia-h200-x2, or 1 GPU for the TP1 part):
#   bash test/gpu/gate.sh            # with the slim bundle carried in .carry/bundle
# TP1 cases run on GPU 0 (tiny, oracle) and GPU 1 (dense 4 layers) in parallel, then the TP2
# cases (parity and the verify all-reduce tests) on both. Engine records, pytest output and a
# summary (test/gpu/summarize_engines.py) land in $OUT; GATE_BUDGET_S (default 540) bounds it all.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 3
OUT=${OUT:-$PWD/.devrun/out}; mkdir -p "$OUT"
BUDGET=${GATE_BUDGET_S:-540} T0=$(date +%s)
left() { echo $(( BUDGET - $(date +%s) + T0 )); }
bash test/gpu/run_on_device.sh --preflight > "$OUT/preflight.log" 2>&1 || { tail -20 "$OUT/preflight.log"; exit 3; }
export PYTHONPATH=${FASTPATH_SITE_FORK:-/tmp/site-fork}:$PWD/python PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
  NVSHMEM_DISABLE_NVLS=1 SGLANG_IS_FLASHINFER_AVAILABLE=false SGLANG_CUDA_COREDUMP_BEFORE_CRASH_WAIT_SECS=0 \
  SGLANG_FASTPATH_MODELS=${SGLANG_FASTPATH_MODELS:-/tmp/fastpath-models}
gpus=$(nvidia-smi -L | wc -l)
mkdir -p "$OUT/tp1a" "$OUT/tp1b" "$OUT/tp2"
run() {  # OUTDIR TIMEOUT PYTEST-ARGS...
  local out=$1 to=$2; shift 2
  OUT=$out timeout -k 10 "$to" python3 -m pytest -v -rA "$@" > "$out/pytest.txt" 2>&1
  echo "[gate t=$(( $(date +%s) - T0 ))s] $(tail -1 "$out/pytest.txt")"
}
tp1_budget=$(( $(left) * 6 / 10 ))
if [ "$gpus" -ge 2 ]; then
  CUDA_VISIBLE_DEVICES=0 run "$OUT/tp1a" "$tp1_budget" test/gpu/test_parity.py -k "tiny_models-1 or oracle" &
  CUDA_VISIBLE_DEVICES=1 run "$OUT/tp1b" "$tp1_budget" test/gpu/test_parity.py -k "dense_models-1" &
  wait
  run "$OUT/tp2" "$(left)" test/gpu/test_verify_allreduce.py test/gpu/test_parity.py -k "allreduce or models-2"
else
  run "$OUT/tp1a" "$(left)" test/gpu/test_parity.py -k "models-1 or oracle"
fi
python3 test/gpu/summarize_engines.py "$OUT"/tp1a/engines "$OUT"/tp1b/engines "$OUT"/tp2/engines --out "$OUT/summary.json"
tar -C "$OUT" -czf "$OUT/gate.tgz" tp1a tp1b tp2

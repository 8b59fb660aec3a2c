# Call A (nvidia-h200-x2, fresh host): patch 0010 on a GPU (a failed capture per runner, tiny pair
# TP=1, GPU 1) while GPU 0 draws the small Kimi-shaped pair; then the scheduler loop sampled
# (benchmark/pysample) on the fork at tp2-pcie, EAGLE-3 acc 3 vs no speculation, bs 1 and 8.
set -uo pipefail
source test/gpu/device_env.sh
mkdir -p "$OUT/logs"; C=${TVM_FFI_CACHE_DIR:-$HOME/.cache/tvm-ffi}; mkdir -p "$C"; tar -C "$C" -xzf .carry/tvm-ffi-cache.tgz
say "preflight done"
( LOG="$OUT/logs/capture-fallback-gpu1.txt"; export CUDA_VISIBLE_DEVICES=1; export OUT=/tmp/capfail
  timeout 300 python3 -m pytest -q -rA -p no:cacheprovider test/gpu/test_capture_fallback_gpu.py > "$LOG" 2>&1 ) &
PAR=$!
CUDA_VISIBLE_DEVICES=0 python3 -m sglang_fastpath models kimi --layers 4 --routed-experts 16 --device cuda \
  --out $M/kimi-small > "$OUT/logs/kimi-small-models.log" 2>&1
say "kimi-small: $(tail -1 "$OUT/logs/kimi-small-models.log" | cut -c1-80)"
wait $PAR; say "capture fallback: $(tail -1 "$OUT/logs/capture-fallback-gpu1.txt")"
grep -rh "CUDA graph capture failed\|runs without its CUDA graph" /tmp/capfail 2>/dev/null | sed 's/^.*WARNING//' | cut -c1-300 | sort | uniq -c > "$OUT/capture-fallback-lines.txt"
timeout "$(left 585)" python3 benchmark/run.py --profile all --kinds e2e --configs tp2-pcie --backends triton \
  --bs 1,8 --acc-len 3 --e2e-runs 2 --pysample-runs 4 --server-args '{"mem_fraction_static": 0.65}' \
  --variant fork=/tmp/site-fork --models $M/kimi-small --out /tmp/bench --name kimi-small-pysample \
  --budget-s "$(left 580)" --no-plot 2>&1 | tail -20
for d in /tmp/bench/*/*-pysample; do [ -d "$d" ] && python3 benchmark/pysample.py "$d" --min-pct 1.5 > "$OUT/$(basename $d).txt" 2>&1; done
tar -C /tmp/bench -czf "$OUT/bench.tgz" . ; tar -C /tmp -czf "$OUT/capfail.tgz" capfail 2>/dev/null; say end; ls -la "$OUT"

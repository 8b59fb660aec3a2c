# Call B (nvidia-h200-x2, fresh host): patch 0011 (requests over the TP group's shared-memory queue)
# A/B in one install: fork vs the same fork with SGLANG_SCHEDULER_BROADCAST_REQS_VIA_MQ=false
# (gloo, as stock), on the small Kimi-shaped oracle pair at tp2-pcie, real acceptance (so greedy
# parity spec on/off is checked), bs 1/8/32, 3 timed runs each, then the scheduler loop sampled.
set -uo pipefail
source test/gpu/device_env.sh
mkdir -p "$OUT/logs"; C=${TVM_FFI_CACHE_DIR:-$HOME/.cache/tvm-ffi}; mkdir -p "$C"; tar -C "$C" -xzf .carry/tvm-ffi-cache.tgz
CUDA_VISIBLE_DEVICES=0 python3 -m sglang_fastpath models kimi --layers 4 --routed-experts 16 --device cuda \
  --out $M/kimi-small > "$OUT/logs/kimi-small-models.log" 2>&1
say "kimi-small: $(tail -1 "$OUT/logs/kimi-small-models.log" | cut -c1-80)"
timeout "$(left 590)" python3 benchmark/run.py --profile all --kinds e2e --configs tp2-pcie --backends triton \
  --bs 1,8,32 --acc-len 0 --e2e-runs 3 --pysample-runs 2 --server-args '{"mem_fraction_static": 0.65}' \
  --variant gloo=/tmp/site-fork --variant-env gloo:SGLANG_SCHEDULER_BROADCAST_REQS_VIA_MQ=false \
  --variant fork=/tmp/site-fork --models $M/kimi-small --out /tmp/bench --name kimi-small-mq-broadcast \
  --budget-s "$(left 585)" --no-plot 2>&1 | tail -24
for d in /tmp/bench/*/raw/*-pysample; do [ -d "$d" ] && python3 benchmark/pysample.py "$d" --min-pct 2 > "$OUT/$(basename $d).txt" 2>&1; done
grep -h "greedy_parity" /tmp/bench/*/raw/*.jsonl 2>/dev/null | cut -c1-200 > "$OUT/parity-lines.txt"
tar -C /tmp/bench -czf "$OUT/bench.tgz" . ; say end; ls -la "$OUT"

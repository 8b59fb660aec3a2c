# Call (nvidia-h200-x2, fresh host): the fork with its whole series (0001-0009: grouped verify
# attention, fallback reasons, 400s for bad input) against stock 0.5.17, both from the same slim bundle.
# GPU 1: greedy parity of the tiny and oracle pairs at TP=1 (EAGLE-3 on/off, graph on/off) while GPU 0
# draws a small Kimi-shaped pair (MLA at Kimi widths, 4 layers, 16 INT4 experts, oracle-wired draft).
# Then e2e at tp2-pcie, stock vs fork, real acceptance (so every job also checks greedy parity between
# EAGLE-3 and no speculation), bs 1/8/32, 2 timed runs each. Marlin comes from the carried JIT cache.
set -uo pipefail
source test/gpu/device_env.sh  # from the repository root: bash benchmark/results/<this folder>/command.sh
mkdir -p "$OUT/logs"; C=${TVM_FFI_CACHE_DIR:-$HOME/.cache/tvm-ffi}; mkdir -p "$C"; tar -C "$C" -xzf .carry/tvm-ffi-cache.tgz
( LOG="$OUT/logs/parity-tp1.txt"; export CUDA_VISIBLE_DEVICES=1 OUT=/tmp/parity  # as run, the log went to the new OUT
  timeout 240 python3 -m pytest -q -rA -p no:cacheprovider test/gpu/test_parity.py -k "tiny_models-1 or oracle" \
    > "$LOG" 2>&1 ) &
PAR=$!
CUDA_VISIBLE_DEVICES=0 python3 -m sglang_fastpath models kimi --layers 4 --routed-experts 16 --device cuda \
  --out $M/kimi-small > "$OUT/logs/kimi-small-models.log" 2>&1
say "kimi-small: $(tail -1 "$OUT/logs/kimi-small-models.log" | cut -c1-80)"
wait $PAR; say "parity tp1: $(tail -1 "$OUT/logs/parity-tp1.txt")"
grep -rh "runs without its CUDA graph" /tmp/parity 2>/dev/null | sed 's/.*WARNING//' | sort | uniq -c > "$OUT/fallbacks-parity.txt"
timeout "$(left 585)" python3 benchmark/run.py --profile all --kinds e2e --configs tp2-pcie --backends triton \
  --bs 1,8,32 --acc-len 0 --e2e-runs 2 --server-args '{"mem_fraction_static": 0.65}' \
  --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork --models $M/kimi-small --out /tmp/bench \
  --name kimi-small-fork-vs-stock --budget-s "$(left 580)" --no-plot 2>&1 | tail -32
grep -h "runs without its CUDA graph\|Triton target verify attention" /tmp/bench/*/logs/*.log 2>/dev/null | cut -c1-240 | sort | uniq -c | head -20 > "$OUT/kernel-and-fallback-lines.txt"
tar -C /tmp/bench -czf "$OUT/bench.tgz" . ; tar -C /tmp -czf "$OUT/parity.tgz" parity 2>/dev/null; say end; ls -la "$OUT"

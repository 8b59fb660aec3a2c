# Call A (nvidia-h200-x2, fresh host): install the slim bundle (fork + stock sites), build SGLang's
# Marlin MoE JIT kernel (warm-jit) while kimi16 is drawn, and send the compiled JIT cache back
# (content-addressed by source hash, arch and tvm-ffi version: later fresh hosts can reuse it).
set -uo pipefail
source test/gpu/device_env.sh  # from the repository root: bash benchmark/results/<this folder>/command-a.sh
mkdir -p "$OUT/logs"; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > "$OUT/logs/gpus.csv"
( python3 -m sglang_fastpath warm-jit > "$OUT/logs/warm-jit.log" 2>&1
  tar -C "${TVM_FFI_CACHE_DIR:-$HOME/.cache/tvm-ffi}" -czf "$OUT/tvm-ffi-cache.tgz" . ) &
WPID=$!
[ -f $M/kimi16/target/config.json ] || python3 -m sglang_fastpath models kimi --layers 16 --routed-experts 96 \
  --device cuda --out $M/kimi16 > "$OUT/logs/kimi16-models.log" 2>&1
say "kimi16: $(tail -1 "$OUT/logs/kimi16-models.log")"
wait $WPID; say "warm-jit: $(tail -2 "$OUT/logs/warm-jit.log" | tr '\n' ' ')"; ls -la "$OUT"; du -sh $M/kimi16

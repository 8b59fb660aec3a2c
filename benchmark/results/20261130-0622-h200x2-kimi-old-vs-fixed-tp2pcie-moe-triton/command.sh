# Call (nvidia-h200-x2): Kimi-K2.5-shaped model (4 layers, INT4 experts) at tp2-pcie:
# (1) compile the Marlin MoE JIT kernel alone, in the background, timing it (tvm-ffi cache);
# (2) draw the model; (3) micro verify k=4, graph and eager, old condition (fork + SGLANG_TEST_FORCE_PCG_FLAG_IN_VERIFY=1)
#     vs fixed (fork), MoE on Marlin when its compile finished by t=270 s, else --moe-runner-backend triton;
# (4) if time is left and Marlin compiled: the kimi greedy-parity test (EAGLE-3 on vs off, TP2).
set -uo pipefail
source test/gpu/device_env.sh  # run from the repository root
mkdir -p "$OUT/logs"
( python3 - > "$OUT/logs/marlin-jit.log" 2>&1 <<'PY'
import time, torch
from sglang.kernels.ops.moe.moe_wna16_marlin import _jit_moe_wna16_marlin_module
t = time.time()
_jit_moe_wna16_marlin_module(torch.bfloat16, False, False)
print(f"marlin moe jit compiled in {time.time() - t:.1f} s", flush=True)
PY
  echo "rc=$?" >> "$OUT/logs/marlin-jit.log"; say "marlin jit: $(tail -2 "$OUT/logs/marlin-jit.log" | tr '\n' ' ')" ) &
[ -f $M/kimi/target/config.json ] || python3 -m sglang_fastpath models kimi --layers 4 --device cuda --out $M/kimi > "$OUT/logs/kimi-models.log" 2>&1
say "kimi drawn: $(du -sh $M/kimi | cut -f1)"; nvidia-smi --query-gpu=memory.used --format=csv,noheader
while [ "$(left 270)" -gt 0 ] && ! grep -q "rc=0" "$OUT/logs/marlin-jit.log"; do sleep 5; done
if grep -q "rc=0" "$OUT/logs/marlin-jit.log"; then MOE='{}'; MOE_NAME=marlin; else MOE='{"moe_runner_backend": "triton"}'; MOE_NAME=triton; fi
say "micro, MoE on $MOE_NAME"
timeout "$(left 520)" python3 benchmark/run.py --profile all --kinds micro --configs tp2-pcie --backends triton \
  --bs 1,8 --ks 4 --topks 1 --eager --iters 10 --repeats 1 --server-args "$MOE" \
  --variant old=/tmp/site-fork --variant-env old:SGLANG_TEST_FORCE_PCG_FLAG_IN_VERIFY=1 \
  --variant-env old:SGLANG_ALL_REDUCE_STATS=1 --variant fixed=/tmp/site-fork --variant-env fixed:SGLANG_ALL_REDUCE_STATS=1 \
  --models $M/kimi --out /tmp/bench --name kimi-old-vs-fixed-tp2pcie-moe-$MOE_NAME --budget-s "$(left 515)" --no-plot 2>&1 | tail -30
tar -C /tmp/bench -czf "$OUT/bench.tgz" . ; say "micro done"
if grep -q "rc=0" "$OUT/logs/marlin-jit.log" && [ "$(left 420)" -gt 0 ]; then
  mkdir -p "$OUT/kimi-parity"
  CUDA_VISIBLE_DEVICES=0,1 OUT=$OUT/kimi-parity timeout -k 10 "$(left 585)" python3 -m pytest -v -rA -p no:cacheprovider \
    test/gpu/test_parity.py -k kimi > "$OUT/kimi-parity/pytest.txt" 2>&1
  say "kimi parity: $(tail -1 "$OUT/kimi-parity/pytest.txt")"
  tar -C "$OUT" -czf "$OUT/kimi-parity.tgz" kimi-parity && rm -rf "$OUT/kimi-parity"
fi
ls -la "$OUT" "$OUT/logs"; say end

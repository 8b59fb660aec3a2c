# Call C (nvidia-h200-x2, warm after call B: sites installed, Marlin JIT cache in place): the
# headline model kimi16 (models kimi --layers 16 --routed-experts 96), stock 0.5.17 vs the fork
# (series 0001-0011), tp2-pcie, triton attention, Marlin MoE, SGLANG_SIMULATE_ACC_LEN=3, bs 1 and
# 8, 3 timed runs each.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_env.sh
mkdir -p "$OUT/logs"; C=${TVM_FFI_CACHE_DIR:-$HOME/.cache/tvm-ffi}; mkdir -p "$C"; tar -C "$C" -xzf .carry/tvm-ffi-cache.tgz
python3 -m sglang_fastpath models kimi --layers 16 --routed-experts 96 --device cuda \
  --out $M/kimi16 > "$OUT/logs/kimi16-models.log" 2>&1
say "kimi16: $(tail -1 "$OUT/logs/kimi16-models.log" | cut -c1-80)"
timeout "$(left 592)" python3 benchmark/run.py --profile all --kinds e2e --configs tp2-pcie --backends triton \
  --bs 1,8 --acc-len 3 --e2e-runs 3 --server-args '{"mem_fraction_static": 0.65}' \
  --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork --models $M/kimi16 --out /tmp/bench16 \
  --name kimi16-fork-vs-stock --budget-s "$(left 588)" --no-plot 2>&1 | tail -20
tar -C /tmp/bench16 -czf "$OUT/bench16.tgz" . ; say end; ls -la "$OUT"

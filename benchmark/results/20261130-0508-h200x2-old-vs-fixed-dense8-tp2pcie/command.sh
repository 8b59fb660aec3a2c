# Call 3 (nvidia-h200-x2): (1) the old condition vs the fix on dense-8 at tp2-pcie (micro, verify eager and
# graphed; old = fork + SGLANG_TEST_FORCE_PCG_FLAG_IN_VERIFY=1, prefill graph on), stock beside them;
# (2) stock vs fork micro at tp1 (2 rounds) on GPU 0 while e2e tp1 (SGLANG_SIMULATE_ACC_LEN=3) runs on GPU 1.
set -uo pipefail
source test/gpu/device_env.sh  # run from the repository root: bash benchmark/results/<this folder>/command.sh
[ -f $M/dense8/target/config.json ] || python3 -m sglang_fastpath models dense --layers 8 --device cuda --out $M/dense8 > /tmp/dense8.log 2>&1
CAL=benchmark/results/20261130-0458-h200x2-gap-dense8-stock-fork/results.json
say "old vs fixed"
timeout "$(left 300)" python3 benchmark/run.py --profile all --kinds micro --configs tp2-pcie --backends triton \
  --bs 1,8,32 --ks 4 --topks 1 --eager --iters 10 --repeats 1 --server-args '{"disable_prefill_cuda_graph": false}' \
  --variant old=/tmp/site-fork --variant-env old:SGLANG_TEST_FORCE_PCG_FLAG_IN_VERIFY=1 \
  --variant stock=/tmp/site-stock --variant fixed=/tmp/site-fork \
  --models $M/dense8 --out /tmp/bench --name old-vs-fixed-dense8-tp2pcie --budget-s "$(left 295)" --no-plot 2>&1 | tail -30
tar -C /tmp/bench -czf "$OUT/bench-old-vs-fixed.tgz" . ; say "tp1 stock vs fork"
timeout "$(left 540)" python3 benchmark/run.py --profile all --kinds micro,e2e --configs tp1 --backends triton \
  --bs 1,8,64 --ks 2,4,8 --topks 1,4 --iters 10 --repeats 2 --acc-len 3 --output-len 256 \
  --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork \
  --models $M/dense8 --out /tmp/bench --name tp1-dense8-stock-fork --budget-s "$(left 535)" --no-plot 2>&1 | tail -60
tar -C /tmp/bench -czf "$OUT/bench.tgz" . ; say "end"; ls -la "$OUT"

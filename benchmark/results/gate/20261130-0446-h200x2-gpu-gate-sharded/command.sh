# Call 1 (nvidia-h200-x2): the correctness gate (8 shards at once, incl. kimi TP2), then the
# item-6 gap e2e at tp2-pcie on dense-8 (fork, telemetry + profile).
set -uo pipefail
source test/gpu/device_env.sh  # run from the repository root: bash benchmark/results/<this folder>/command.sh
[ -f $M/dense8/target/config.json ] || (python3 -m sglang_fastpath models dense --layers 8 --device cuda:1 --out $M/dense8 > /tmp/dense8.log 2>&1; tail -3 /tmp/dense8.log) &
DPID=$!
GATE_SKIP_PREFLIGHT=1 GATE_BUDGET_S=330 OUT=/tmp/gate bash test/gpu/gate.sh 2>&1 | tee $OUT/gate.txt
cp /tmp/gate/gate.tgz /tmp/gate/summary.json $OUT/ 2>/dev/null
wait $DPID
say "gate done; gap e2e"
timeout $(left 585) python3 benchmark/run.py --profile all --kinds e2e --configs tp2-pcie --backends triton \
  --bs 1 --output-len 256 --acc-len 0 --profile-steps 24 --server-args '{"disable_prefill_cuda_graph": false}' \
  --variant fork=/tmp/site-fork --variant-env fork:SGLANG_ALL_REDUCE_STATS=1 --models $M/dense8 \
  --out /tmp/bench --name gap-tp2pcie-dense8 --budget-s $(left 580) --no-plot 2>&1 | tail -40
tar -C /tmp/bench -czf $OUT/bench.tgz . ; say "end"; ls -la $OUT

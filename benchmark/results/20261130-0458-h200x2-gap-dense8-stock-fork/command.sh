# Call 2 (nvidia-h200-x2): all-reduce cost by method/size (NVLink and PCIe-like), then the item-6 gap:
# EAGLE-3 vs no speculation e2e on dense-8 (oracle draft, real acceptance), stock and fork, tp2-pcie and tp2.
set -uo pipefail
source test/gpu/device_env.sh  # run from the repository root: bash benchmark/results/<this folder>/command.sh
[ -f $M/dense8/target/config.json ] || python3 -m sglang_fastpath models dense --layers 8 --device cuda --out $M/dense8 > /tmp/dense8.log 2>&1 &
DPID=$!
mkdir -p /tmp/ar
timeout 90 python3 benchmark/collective_cost.py --out /tmp/ar/ar-nvlink.json 2>&1 | tail -20
NCCL_P2P_DISABLE=1 timeout 90 python3 benchmark/collective_cost.py --out /tmp/ar/ar-pcie-like.json 2>&1 | tail -20
cp /tmp/ar/*.json "$OUT"/
wait $DPID
say "gap e2e"
timeout "$(left 585)" python3 benchmark/run.py --profile all --kinds e2e --configs tp2-pcie,tp2 --backends triton \
  --bs 1 --output-len 256 --acc-len 0 --profile-steps 24 --server-args '{"disable_prefill_cuda_graph": false}' \
  --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork --variant-env fork:SGLANG_ALL_REDUCE_STATS=1 \
  --calibrate benchmark/results/20261130-0452-h200x2-gap-tp2pcie-dense8/results.json \
  --models $M/dense8 --out /tmp/bench --name gap-dense8-stock-fork --budget-s "$(left 580)" --no-plot 2>&1 | tail -40
tar -C /tmp/bench -czf "$OUT/bench.tgz" . ; say "end"; ls -la "$OUT"

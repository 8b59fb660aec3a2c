# session 39 device call 2 (warm nvidia-h100-x1 after s37e): test/gpu/queue/s37d.sh as committed at 6da8805
# session 37, call D (fresh or warm nvidia-h200; ~400 s: one dense-8 process, graphs to bs 256). Issue 12's
# `verify_graph_hit` = 1.0 for every bs x K <= 512, at the batch sizes no run has formed yet: 0.5.17's EAGLE default
# of 48 running requests never makes a batch above 48, so sessions 19-37 measured bs 1-64 only. Here the harness sets
# --max-running-requests to the largest bs (256), graphs go to bs 256, and benchmark/configs/adaptive-ks-bs256.json
# routes K 2/3/4/6/8 to bs 64, K 2/3/4 to bs 72-128 and K 2 to bs 136-256 (at most 512 verify rows a graph; patch
# 0016 captures each state only at the sizes routed to it). dense-8 at accept 3 (oracle pair), bs 96 / 128 / 256,
# 64 new tokens, 1 run, launched at K 2 (`--e2e-k 2`: the start-up state captures at every bs, so K 4 there would
# make 1024-row graphs), plain decode first; ALL3 + BF16 switches; greedy parity EAGLE-3 vs plain decode; the capture
# lines (bs lists, memory kept) and any fallback reason (patch 0008) printed.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
V="--variant fork=/tmp/site-fork $(variant_env fork $ALL3_BF16_VARS)"
ARGS="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-bs256.json\", \"cuda_graph_max_bs_decode\": 256}"
$B --models $M/dense8-acc3 $V --e2e-k 2 --bs 96,128,256 --acc-len 0 --e2e-runs 1 --output-len 64 --server-args "$ARGS" \
  --name dense8-ks-bs256-graph-hit --budget-s $(left 560) > $L/d1.log 2>&1
say "dense8 bs to 256 rc=$?"
for f in $BB/*/logs/e2e-*.log; do echo "== $f"; grep -h "CUDA graph begin\|graph pool grew\|Built adaptive\|runs without its CUDA graph\|capture failed" $f | sed 's/^\[[^]]*\] //' | cut -c1-200; done
cycle_ms
summ
pack s37d

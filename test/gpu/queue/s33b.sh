# session 33, call B (warm after s33a.sh: kimi16-acc3 drawn; ~320 s, two invocations). Issue 12's K-set memory with
# the K set held to a row budget: benchmark/configs/adaptive-ks-rows256.json keeps K 6 and K 8 to bs <= 32, so every
# verify graph has at most 256 rows (fixed K 4's at bs 64) and patch 0016 captures the K-8 state only to bs 32; patch
# 0041 then sizes the shared logits buffer and Triton split-KV partials for those 256 rows instead of K 8 x bs 64.
# Session 32 (benchmark/results/20261204-1914-h200-tp1-kimi16-graph-held-kset-vs-fixed/, without 0041): the full K set
# kept 1.56 GB (the K-8 state's verify grew the pool by 0.32 GB; buffers sized for 512 rows another 0.32), fixed K 4
# 0.72, with the ALL3 + BF16 switches. Expected here: both parts gone, the held K set near fixed K 4 plus its other
# states' draft graphs (~0.85 GB; issue 12 asks <= 1.5x stock's single K, s33a.sh's stockheld figure). Same switches,
# graphs to bs 64, bs 64, 64 new tokens; then fixed K 4 again in the same call for the ratio.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
V="--variant fork=/tmp/site-fork $(variant_env fork $ALL3_BF16_VARS)"
ROWS="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-rows256.json\", \"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64}"
CAP="{\"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64}"
for run in rows256 fixed; do
  ARGS=$CAP; [ $run = rows256 ] && ARGS=$ROWS
  $B --models $M/kimi16-acc3 $V --bs 64 --acc-len 0 --e2e-runs 1 --output-len 64 --server-args "$ARGS" \
    --name kimi16-graph-held-$run --budget-s $(left 560) > $L/b-$run.log 2>&1
  say "graph held $run rc=$?"
done
for f in $BB/*/logs/e2e-*.log; do echo "== $f"; grep -h "graph pool grew" $f | sed 's/^\[[^]]*\] //' | cut -c1-160; done
pack s33b

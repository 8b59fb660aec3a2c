# x2 call D (warm after x2c.sh on nvidia-h200-x2; written in session 33). Issue 12's graph-hit target at tp2-pcie:
# verify_graph_hit = 1.0 for every bs x K <= 512, K in {2, 3, 4, 6, 8}, with adaptive speculation switching K
# (benchmark/configs/adaptive-ks.json, real acceptance of the accept-3 pairs), kimi16 and dense-8, bs 1 / 8 / 32 / 64,
# graphs to bs 64, 1 run a point; the e2e jobs record `verify_graph_hit` per bs and K and greedy parity at TP 2.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
KS64="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\", \"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64}"
for pair in kimi16-acc3 dense8-acc3; do
  $B2 --models $M/$pair --variant all3=/tmp/site-fork $ALL3 $BF16 --bs 1,8,32,64 --acc-len 0 --e2e-runs 1 \
    --server-args "$KS64" --name $pair-tp2pcie-ks-graph-hit --budget-s $(left 570) > $L/x2d-$pair.log 2>&1
  say "x2d $pair rc=$?"
done
pack x2d

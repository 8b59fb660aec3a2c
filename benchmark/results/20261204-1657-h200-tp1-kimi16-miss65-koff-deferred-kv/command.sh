# session 31 device call B (warm after calls A and A'; slim bundle of commit 83766f7, patches 0001-0038): test/gpu/queue/s31d.sh as of that commit
# session 31, call D (warm after s31a.sh; draws kimi16-miss65, ~50 s). Issue 12's accept-1.5 target ("EAGLE-3 >= no
# speculation at every bs where fixed K loses"): the throughput policy over the K set plus steps 0 (adaptive-ks-off.json)
# with the steps-0 switches (STEPS0_VARS) and patch 0038 (SGLANG_SPEC_KV_ONLY_DEFER_CYCLES=16), against plain decode in
# the same process, kimi16 with the draft wrong at 65% of positions, bs 1 / 8 / 32, 2 runs. Sessions 25-26 (0034 only):
# 0.94-0.955x / 1.00-1.04x / 0.95-0.956x. Run only if s31a.sh shows 0038 bringing the steps-0 cycle to plain decode's.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-miss65 kimi --layers 16 --routed-experts 96 --draft-miss-rate 0.65
KOFF_KIMI="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-off.json\", \"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 32}"
V="--variant d16=/tmp/site-fork $(variant_env d16 $STEPS0_VARS SGLANG_SPEC_KV_ONLY_DEFER_CYCLES=16)"
$B --models $M/kimi16-miss65 $V --bs 1,8,32 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$KOFF_KIMI" \
  --name kimi16-miss65-koff-deferred-kv --budget-s $(left 560) > $L/d1.log 2>&1
say "miss65 koff deferred kv rc=$?"
pack s31d

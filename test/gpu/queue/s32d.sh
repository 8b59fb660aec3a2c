# session 32, call D (warm after s32a.sh; draws kimi16-acc3, ~45 s; ~330 s). Patch 0039 where speculation pays: the
# throughput policy over steps 0 plus the K set (adaptive-ks-off.json) with the STEPS0_VARS switches, on kimi16 at real
# accept length 3, bs 1 / 8 / 32, plain decode first in the same process, 2 runs after a 256-token warm-up. 0039 makes a
# longer chain beat the running one by 5% before the slot moves up; this checks it does not leave the slot on a short
# chain where a longer one pays. Session 30's fixed K 4 on this pair (benchmark/results/
# 20261204-1439-h200-tp1-kimi16-short-stock-vs-fork/): 1.63x / 1.71x / 1.70x of the fork's plain decode at bs 1 / 8 / 32.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
KOFF_KIMI="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-off.json\", \"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 32}"
V="--variant margin=/tmp/site-fork $(variant_env margin $STEPS0_VARS)"
$B --models $M/kimi16-acc3 $V --bs 1,8,32 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$KOFF_KIMI" \
  --name kimi16-acc3-koff-margin --budget-s $(left 570) > $L/d1.log 2>&1
say "acc3 koff margin rc=$?"
grep -h "Adaptive throughput slot" $BB/*/logs/*.log 2>/dev/null | grep -o "(bs [0-9]*)" | sort | uniq -c
pack s32d

# session 32 device call A (fresh host; slim bundle of commit 907b485, patches 0001-0040): bash test/gpu/queue/s32a.sh (PAIR miss65, the default) as of that commit
# session 32, calls A and D (slim bundle with patches 0001-0040). Patch 0039 (the throughput policy keeps the chain a
# decision settled on unless another scores 5% above it): the policy over steps 0 plus the K set (adaptive-ks-off.json),
# the STEPS0_VARS switches (now with 0038's 16-cycle KV deferral), plain decode first in the same process, bs 1 / 8 / 32,
# 2 runs after a 256-token warm-up.
# - `s32a.sh` (call A, fresh nvidia-h200, ~470 s): kimi16 with the draft wrong at 65% of positions, issue 12's
#   accept-1.5 target ("EAGLE-3 >= no speculation at every bs where fixed K loses"). Session 31 (s31d.sh, without
#   0039): 0.975 / 0.919 / 0.980 of plain decode, the bs-8 slot switching 20 times between steps 0 / 1 / 2 that tied
#   within 4% (benchmark/results/20261204-1657-h200-tp1-kimi16-miss65-koff-deferred-kv/). Expected: bs 8 near its
#   settled 0.991, bs 1 and 32 unchanged (steps 0 won there by more than 5%). The adaptive states' start-up lines
#   carry patch 0040's graph pool + buffers figures (issue 12's K-set memory).
# - `s32a.sh acc3` (call D, warm, draws kimi16-acc3, ~330 s): where speculation pays, that the margin does not leave
#   the slot on a short chain where a longer one pays. Session 30's fixed K 4 on this pair (benchmark/results/
#   20261204-1439-h200-tp1-kimi16-short-stock-vs-fork/): 1.63x / 1.71x / 1.70x of the fork's plain decode.
set -uo pipefail
PAIR=${1:-miss65}
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
case $PAIR in
  miss65) draw kimi16-miss65 kimi --layers 16 --routed-experts 96 --draft-miss-rate 0.65 ;;
  acc3) draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3 ;;
  *) echo "s32a.sh: miss65 or acc3, not $PAIR" >&2; exit 2 ;;
esac
KOFF_KIMI="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-off.json\", \"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 32}"
V="--variant margin=/tmp/site-fork $(variant_env margin $STEPS0_VARS)"
$B --models $M/kimi16-$PAIR $V --bs 1,8,32 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$KOFF_KIMI" \
  --name kimi16-$PAIR-koff-margin --budget-s $(left 570) > $L/a1.log 2>&1
say "$PAIR koff margin rc=$?"
grep -h "Adaptive throughput slot" $BB/*/logs/*.log 2>/dev/null | grep -o "(bs [0-9]*)" | sort | uniq -c
pack s32a-$PAIR

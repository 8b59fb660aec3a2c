# session 32, call A (fresh nvidia-h200; slim bundle with patches 0001-0039; a full call, ~470 s). Issue 12's
# accept-1.5 target ("EAGLE-3 >= no speculation at every bs where fixed K loses") with patch 0039 (the throughput
# policy moves to a longer chain only when it scores 5% above the running one): the policy over steps 0 plus the K set
# (adaptive-ks-off.json), the STEPS0_VARS switches (now with 0038's 16-cycle KV deferral), plain decode first in the
# same process, kimi16 with the draft wrong at 65% of positions, bs 1 / 8 / 32, 2 runs after a 256-token warm-up.
# Session 31 (s31d.sh, the same without 0039): 0.975 / 0.919 / 0.980 of plain decode, the bs-8 slot switching 20 times
# between steps 0 / 1 / 2 that tied within 4% (benchmark/results/20261204-1657-h200-tp1-kimi16-miss65-koff-deferred-kv/).
# Expected: bs 8 near its settled 0.991, bs 1 and 32 unchanged (steps 0 already won there by more than 5%).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-miss65 kimi --layers 16 --routed-experts 96 --draft-miss-rate 0.65
KOFF_KIMI="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-off.json\", \"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 32}"
V="--variant margin=/tmp/site-fork $(variant_env margin $STEPS0_VARS)"
$B --models $M/kimi16-miss65 $V --bs 1,8,32 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$KOFF_KIMI" \
  --name kimi16-miss65-koff-margin --budget-s $(left 570) > $L/a1.log 2>&1
say "miss65 koff margin rc=$?"
grep -h "Adaptive throughput slot" $BB/*/logs/*.log 2>/dev/null | grep -o "(bs [0-9]*)" | sort | uniq -c
pack s32a

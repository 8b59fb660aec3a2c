# session 42 device call 2 (warm host): bash test/gpu/queue/s41c.sh
# session 41, call C (fresh or warm nvidia-h200 / nvidia-h100-x1; ~470 s on a fresh host: one kimi16 process).
# Issue 12's accept-1.5 target on the headline model with everything since session 32: kimi16 with the draft wrong at
# 65% of positions, the throughput policy over steps 0 plus the K set (adaptive-ks-off.json), the spec off path
# (OFF_VARS, patches 0045-0047: a steps-0 batch served as a plain decode cycle) and patch 0053 (the policy kept on its
# chain through slow stretches), plain decode first in the same process, bs 1 / 8 / 32, 2 runs after a 256-token
# warm-up, greedy parity. Session 32 (H200, the steps-0 cycle, 0001-0040): 0.984x / 0.988x / 0.982x plain decode
# (benchmark/results/20261204-1855-h200-tp1-kimi16-miss65-koff-margin/); session 41 (H100, every bs held at steps 0):
# the off path 0.993x / 0.992x at bs 1 / 8 (benchmark/results/20261205-1544-h100-tp1-kimi16-steps0-s0-vs-off/).
# Read: EAGLE-3 / plain decode per bs against 1.0 (the target), and the slot's share of results at steps 0.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-miss65 kimi --layers 16 --routed-experts 96 --draft-miss-rate 0.65
KOFF_KIMI="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-off.json\", \"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 32}"
V="--variant off=/tmp/site-fork $(variant_env off $OFF_VARS)"
$B --models $M/kimi16-miss65 $V --bs 1,8,32 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$KOFF_KIMI" \
  --name kimi16-miss65-koff-off-0053 --budget-s $(left 570) > $L/c.log 2>&1
say "kimi16 miss65 koff off rc=$?"
grep -h "Adaptive throughput slot" $BB/*/logs/*.log 2>/dev/null | grep -o "(bs [0-9]*)" | sort | uniq -c
grep -h "Speculation off path\|SGLANG_SPEC_OFF_PATH is ignored" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head
summ
pack s41c

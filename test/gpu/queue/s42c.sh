# session 42, call C (fresh or warm nvidia-h200 / nvidia-h100-x1; ~420 s: one kimi16 process). Issue 12's accept-1.5
# target asks EAGLE-3 >= no speculation at every bs in 1..64 on kimi16; the off path with patch 0053 has run at bs 1 / 8 /
# 32 only (session 42, one H100: 1.007x / 0.977x / 0.987x plain decode,
# benchmark/results/20261205-1825-h100-tp1-kimi16-miss65-koff-off-0053/; graphs to bs 32 there). Here bs 16 and 64 with
# graphs to bs 64: kimi16-miss65 (expected accept 1.51), `adaptive-ks-off.json`, the off path, 0051's per-result debug
# line on ($L/slot-samples.txt: the share of results at each step count), 2 runs after a 256-token warm-up, plain decode
# first. Read: spec / plain decode at bs 16 and 64, the share at steps 0, greedy parity, verify_graph_hit.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-miss65 kimi --layers 16 --routed-experts 96 --draft-miss-rate 0.65
KOFF64="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-off.json\", \"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64}"
V="--variant off=/tmp/site-fork $(variant_env off $OFF_VARS $(policy_debug_log))"
$B --models $M/kimi16-miss65 $V --bs 16,64 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$KOFF64" \
  --name kimi16-miss65-koff-off-bs16-64 --budget-s $(left 570) > $L/c.log 2>&1
say "kimi16 miss65 koff off bs 16/64 rc=$?"
step_shares $L/slot-samples.txt
summ
pack s42c

# session 28, call B (warm after A: kimi16-acc3 drawn). Issue 12: where the steps-0 cycle's extra time over a plain
# decode step goes, before building docs/steps0-as-decode-plan.md (patch 0037). Speculation held at steps 0
# (benchmark/configs/adaptive-steps0.json) with 0034's KV-only draft write (all3 + bf16 logits + KV_ONLY), bs 1 / 8 / 32,
# 12 profiled steps a point for each mode (benchmark/cycle_phases.py: GPU busy vs host gaps per phase), greedy parity.
# Session 26: steps-0 cycle 4.09 ms vs plain decode 3.81 ms at bs 1 (kimi16-miss65). If the gap is host time, 0037
# (the target as a DECODE forward) can close it; if it is GPU work of the verify path or the draft write, it cannot.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
S0="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-steps0.json\", \"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 32}"
$B --models $M/kimi16-acc3 --variant kvonly=/tmp/site-fork $(variant_env kvonly $ALL3_BF16_VARS $KV_ONLY_VAR) \
  --bs 1,8,32 --acc-len 0 --e2e-runs 2 --profile-steps 12 --server-args "$S0" --name kimi16-steps0-trace \
  --budget-s $(left 570) > $L/b1.log 2>&1
say "steps0 trace rc=$?"
ls $BB/*/ | head -20
pack s28b

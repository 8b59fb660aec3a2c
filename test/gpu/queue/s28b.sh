# session 28, call B (warm after A: kimi16-acc3 drawn). Issue 12: speculation held at steps 0
# (benchmark/configs/adaptive-steps0.json) on kimi16, 0034's KV-only draft write (all3 + bf16 logits + KV_ONLY), against
# the same plus patch 0037 (SGLANG_SPEC_STEPS0_AS_DECODE=1: the target runs a plain DECODE step at steps 0), bs 1 / 8 / 32,
# plain decode in each process, greedy parity (0037's first GPU run), 8 profiled steps a point (benchmark/cycle_phases.py:
# GPU busy vs host gaps, steps-0 cycle vs decode step). Session 26: steps-0 cycle 4.09 ms vs plain decode 3.81 at bs 1.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
S0="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-steps0.json\", \"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 32}"
V="--variant kvonly=/tmp/site-fork --variant dec=/tmp/site-fork $(variant_env kvonly $ALL3_BF16_VARS $KV_ONLY_VAR)"
V="$V $(variant_env dec $ALL3_BF16_VARS $KV_ONLY_VAR SGLANG_SPEC_STEPS0_AS_DECODE)"
$B --models $M/kimi16-acc3 $V --bs 1,8,32 --acc-len 0 --e2e-runs 2 --profile-steps 8 --server-args "$S0" \
  --name kimi16-steps0-as-decode --budget-s $(left 570) > $L/b1.log 2>&1
say "steps0 as decode rc=$?"
grep -h "Built adaptive\|target_decode\|DECODE graphs\|Traceback\|Error" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | cut -c1-160 | sort | uniq -c | head -20
pack s28b

# session 29 device call B (warm after call A; slim bundle of commit b22eeab, patches 0001-0038): test/gpu/queue/s29d.sh as of that commit.
# session 29, call B (warm after s29a.sh: kimi16-acc3 drawn). Issue 12: patch 0038 side by side. Speculation held at steps 0
# (benchmark/configs/adaptive-steps0.json) on kimi16 with 0034's KV-only draft write and 0037 (steps 0 as a plain
# DECODE step) in both arms; `stub` sets SGLANG_SPEC_STEPS0_BONUS_ONLY_RELAY=0 (0037 as measured in session 28: zero
# stand-ins, four relay writes), `relay` keeps 0038's default (the bonus token alone). bs 1 / 8 / 32, plain decode in
# each process, greedy parity. Session 28: steps-0 cycle 3.91 ms vs plain decode 3.74 at bs 1; 0038 removes three
# fills and three index_puts a cycle (~40-60 us expected, docs/steps0-host-path.md C1).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
S0="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-steps0.json\", \"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 32}"
V="--variant stub=/tmp/site-fork --variant relay=/tmp/site-fork"
V="$V $(variant_env stub $ALL3_BF16_VARS $KV_ONLY_VAR SGLANG_SPEC_STEPS0_AS_DECODE SGLANG_SPEC_STEPS0_BONUS_ONLY_RELAY=0)"
V="$V $(variant_env relay $ALL3_BF16_VARS $KV_ONLY_VAR SGLANG_SPEC_STEPS0_AS_DECODE)"
$B --models $M/kimi16-acc3 $V --bs 1,8,32 --acc-len 0 --e2e-runs 3 --server-args "$S0" \
  --name kimi16-steps0-bonus-relay --budget-s $(left 570) > $L/d2.log 2>&1
say "steps0 bonus relay rc=$?"
grep -h "Traceback\|Error" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | cut -c1-160 | sort | uniq -c | head
pack s29d

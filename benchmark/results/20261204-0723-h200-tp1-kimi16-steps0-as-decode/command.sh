# session 28 device call C (nvidia-h200, warm from call B, which had landed on a fresh host and failed in 37 s for want of a drawn model; so this host never ran warm-jit; slim bundle of commit 2ad7045, patches 0001-0037, sm90 JIT cache): test/gpu/queue/s28b.sh as of that commit.
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

# session 27 device call A, run twice: the first (fresh nvidia-h200) failed at once (ServerArgs has no cuda_graph_max_bs in 0.5.17: it is cuda_graph_max_bs_decode); the second (warm) is this run. Slim bundle of commit 27f0dd0 (patches 0001-0036) with the sm90 JIT cache: .venv/bin/sglang-fastpath bundle --out .carry/bundle --profile slim --jit-cache build/cache/jit/sm90; carry .carry; test/gpu/device_tree.sh hide/restore around the call.
# session 27, call A (fresh nvidia-h200; slim bundle with --jit-cache build/cache/jit/sm90; carry .carry;
# device_tree.sh hide/restore). Issue 12: patch 0036 (SGLANG_SPEC_KV_ONLY_BATCH=8) on kimi16-miss65 (accept ~1.5), the
# K set plus steps 0, all3 + bf16 logits + 0034's switch + 0036, bs 1/8/32, plain decode in the same process, greedy
# parity. Session 26 lost this run twice to the ~3.5-min EAGLE-3 start-up (five K states captured to bs 256):
# cuda_graph_max_bs 32 now (every measured bs is <= 32). Reference: kvonly, session 26 (0.955 / 1.039 / 0.956x).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-miss65 kimi --layers 16 --routed-experts 96 --draft-miss-rate 0.65
python3 -m sglang_fastpath warm-jit > $L/warm-jit.log 2>&1; say "$(tail -2 $L/warm-jit.log | head -1)"
K16OFF="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-off.json\", \"mem_fraction_static\": 0.65, \"max_running_requests\": 256, \"cuda_graph_max_bs_decode\": 32}"
KV="--variant kvb8=/tmp/site-fork $(variant_env kvb8 $ALL3_BF16_VARS $KV_ONLY_VAR SGLANG_SPEC_KV_ONLY_BATCH=8)"
$B --models $M/kimi16-miss65 $KV --bs 1,8,32 --acc-len 0 --e2e-runs 2 \
  --e2e-warmup-len 256 --server-args "$K16OFF" --calibrate test/gpu/queue/calib-kimi16-koff.json --name kimi16-miss65-kvb8 --budget-s $(left 560) > $L/a1.log 2>&1
say "kvb8 rc=$?"
grep -h "KV-only\|steps-0 KV\|SPEC_KV_ONLY_BATCH\|Built adaptive" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | cut -c1-160 | sort | uniq -c | head -20
[ $(left 580) -gt 60 ] && draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
pack s27a

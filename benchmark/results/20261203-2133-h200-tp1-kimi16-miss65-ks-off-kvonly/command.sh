# session 25 device call C (nvidia-h200, warm host after call A); slim bundle with the sm90 JIT cache of commit 5b5480f (patches 0001-0034), built by: .venv/bin/sglang-fastpath bundle --out .carry/bundle --profile slim --jit-cache build/cache/jit/sm90; carry .carry .devrun; test/gpu/device_tree.sh hide/restore around the call
# session 25, call C (warm; kimi bundle with patch 0034). Issue 12: patch 0034 (steps 0 writes only the draft's KV,
# SGLANG_SPEC_KV_ONLY_ZERO_STEP_DRAFT_EXTEND=1) for the first time on a GPU: kimi16 with the draft wrong at 65% of
# positions (accept ~1.4), the K set plus steps 0 (adaptive-ks-off.json), variant all3 (all3 + bf16 logits, session 23's
# config) against kvonly (the same plus the switch), bs 1/8/32, greedy parity in each, one process per variant.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-miss65 kimi --layers 16 --routed-experts 96 --draft-miss-rate 0.65
K16OFF="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-off.json\", \"mem_fraction_static\": 0.65}"
KV="--variant kvonly=/tmp/site-fork"
for v in SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM SGLANG_TRITON_SHARED_GRAPH_STATE SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN \
         SGLANG_SPEC_CYCLE_STATS SGLANG_CUDA_GRAPH_BF16_VERIFY_LOGITS SGLANG_SPEC_KV_ONLY_ZERO_STEP_DRAFT_EXTEND; do
  KV="$KV --variant-env kvonly:$v=1"; done
$B --models $M/kimi16-miss65 --variant all3=/tmp/site-fork $ALL3 $BF16 $KV --bs 1,8,32 --acc-len 0 --e2e-runs 2 \
  --e2e-warmup-len 256 --server-args "$K16OFF" --name kimi16-miss65-koff-kvonly --budget-s $(left 520) > $L/c1.log 2>&1
say "kvonly rc=$?"
grep -h "draft extend KV-only\|draft_extend_kv_only" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head
pack s25c

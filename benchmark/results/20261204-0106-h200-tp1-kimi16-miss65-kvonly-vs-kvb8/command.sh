# session 26 device call B (nvidia-h200, warm host after call A: models drawn, Marlin built); slim bundle of commit 0d37f73 (patches 0001-0036), built by: .venv/bin/sglang-fastpath bundle --out .carry/bundle --profile slim; carry .carry .devrun; test/gpu/device_tree.sh hide/restore around the call. The budget (left 540) ended kvb8's EAGLE-3 engine during its capture.
# session 26, call B (warm after A: models drawn, Marlin built). Issue 12: patch 0036 (SGLANG_SPEC_KV_ONLY_BATCH=8) on
# kimi16 with the draft wrong 65% (accept ~1.5), K set plus steps 0 (adaptive-ks-off.json), variant kvonly (all3 + bf16
# logits + 0034's switch) against kvb8 (the same plus 0036 at 8), bs 1/8/32, max_running_requests 256, greedy parity.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-miss65 kimi --layers 16 --routed-experts 96 --draft-miss-rate 0.65
K16OFF="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-off.json\", \"mem_fraction_static\": 0.65, \"max_running_requests\": 256}"
KV="--variant kvonly=/tmp/site-fork --variant kvb8=/tmp/site-fork"
for v in SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM SGLANG_TRITON_SHARED_GRAPH_STATE SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN \
         SGLANG_SPEC_CYCLE_STATS SGLANG_CUDA_GRAPH_BF16_VERIFY_LOGITS SGLANG_SPEC_KV_ONLY_ZERO_STEP_DRAFT_EXTEND; do
  KV="$KV --variant-env kvonly:$v=1 --variant-env kvb8:$v=1"; done
KV="$KV --variant-env kvb8:SGLANG_SPEC_KV_ONLY_BATCH=8"
$B --models $M/kimi16-miss65 $KV --bs 1,8,32 --acc-len 0 --e2e-runs 2 \
  --e2e-warmup-len 256 --server-args "$K16OFF" --name kimi16-miss65-kvonly-vs-kvb8 --budget-s $(left 540) > $L/b1.log 2>&1
say "kvb8 rc=$?"
grep -h "KV-only\|kv_only\|KV ring\|steps-0 KV" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head -20
pack s26b

# ---- session 26 device call C (fresh host; the same bundle plus the sm90 JIT cache, --jit-cache build/cache/jit/sm90): kvb8 alone; its budget (left 495) ended the EAGLE-3 engine again, 13 s before its capture finished. raw.tar.gz holds it under callC/
# session 26, call C (fresh host expected; slim bundle of commit 0d37f73 with the sm90 JIT cache). Issue 12: patch 0036
# (SGLANG_SPEC_KV_ONLY_BATCH=8) alone: call B ran kvonly and its budget ended kvb8 during capture. kimi16 with the draft
# wrong 65% (accept ~1.5), K set plus steps 0 (adaptive-ks-off.json), all3 + bf16 logits + 0034's switch + 0036 at 8,
# bs 1/8/32, max_running_requests 256, plain decode in the same process, greedy parity. Then (issue 18) patch 0035's
# plain decode swept over tiles and split counts (attn_verify_bench --decode-sweep) with what is left.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-miss65 kimi --layers 16 --routed-experts 96 --draft-miss-rate 0.65
python3 -m sglang_fastpath warm-jit > $L/warm-jit.log 2>&1; say "$(tail -2 $L/warm-jit.log | head -1)"
K16OFF="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-off.json\", \"mem_fraction_static\": 0.65, \"max_running_requests\": 256}"
KV="--variant kvb8=/tmp/site-fork"
for v in SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM SGLANG_TRITON_SHARED_GRAPH_STATE SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN \
         SGLANG_SPEC_CYCLE_STATS SGLANG_CUDA_GRAPH_BF16_VERIFY_LOGITS SGLANG_SPEC_KV_ONLY_ZERO_STEP_DRAFT_EXTEND; do
  KV="$KV --variant-env kvb8:$v=1"; done
KV="$KV --variant-env kvb8:SGLANG_SPEC_KV_ONLY_BATCH=8"
$B --models $M/kimi16-miss65 $KV --bs 1,8,32 --acc-len 0 --e2e-runs 2 \
  --e2e-warmup-len 256 --server-args "$K16OFF" --name kimi16-miss65-kvb8 --budget-s $(left 495) > $L/c1.log 2>&1
say "kvb8 rc=$?"
grep -h "KV-only\|kv_only\|KV ring\|steps-0 KV\|SPEC_KV_ONLY_BATCH" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | cut -c1-200 | sort | uniq -c | head -20
timeout $(left 578) python3 benchmark/tools/attn_verify_bench.py --out $BB/attn-decode --budget-s $(( $(left 578) - 12 )) \
  --no-sweep --no-extend --decode-sweep --k 4 --bs 1,8,32 --ctx 8192,32768 --heads 64,8 > $L/attn-decode.log 2>&1
say "attn decode sweep rc=$?"; tail -16 $L/attn-decode.log
pack s26c

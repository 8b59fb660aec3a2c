# session 37 device call 3 (warm after s36a): test/gpu/queue/s36b.sh as committed at 1964592; the tma engine timed out at bs 8 (16k-token prompts: ~33 s a prefill call) and the ws engine was skipped
# session 36, call B (warm or fresh nvidia-h200; ~480 s: two kimi16 engines at 16k prompts). Issue 18 end to end:
# patch 0044's warp-specialized verify attention (SGLANG_ENABLE_TRITON_WS_VERIFY) in a server beside patch 0032's TMA
# kernel, kimi16 at accept 3, --page-size 64, 16k-token prompts, bs 1 / 8, K 4, 128 new tokens, 2 runs; first its GPU
# tests from the patch's own file (sgl-kernel/fastpath_kernels/attention_ws/kernel.py reads patches/). Kernel alone
# (benchmark/results/20261205-0316-h200-attn-verify-ws-gluon/): 1.1-1.7x faster than 0032, so per layer at 16k about
# 15-50 us less a verify (16 layers: ~0.2-0.8 ms of a ~4-9 ms cycle). Session 25 at 8k, bs 1: 400.0 tok/s with and
# without 0032 (attention 0.05 ms of a 7.5-ms cycle). Greedy parity EAGLE-3 vs plain decode in each; the start-up line
# "MLA by a warp-specialized kernel" must not say "not used".
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
timeout 100 python3 -m pytest -q -p no:cacheprovider -m gpu test/test_verify_attention_ws.py > $L/ws-gpu-tests.log 2>&1
say "ws gpu tests rc=$?"; tail -3 $L/ws-gpu-tests.log
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
P64="{\"page_size\": 64, \"mem_fraction_static\": 0.65}"
V="--variant tma=/tmp/site-fork --variant ws=/tmp/site-fork $(variant_env tma SGLANG_ENABLE_TRITON_TMA_VERIFY)"
V="$V $(variant_env ws SGLANG_ENABLE_TRITON_TMA_VERIFY SGLANG_ENABLE_TRITON_WS_VERIFY)"
$B --models $M/kimi16-acc3 $V --bs 1,8 --prompt-len 16384 --output-len 128 --acc-len 0 --e2e-runs 2 \
  --server-args "$P64" --name kimi16-p64-16k-ws-vs-tma --budget-s $(left 560) > $L/b1.log 2>&1
say "ws e2e rc=$?"
grep -h "MLA by a warp-specialized\|MLA KV tiles by TMA\|warp-specialized MLA verify attention not used" \
  $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head
summ
pack s36b

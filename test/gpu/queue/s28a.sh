# session 28, call A (fresh nvidia-h200; slim bundle with --jit-cache build/cache/jit/sm90; carry .carry;
# device_tree.sh hide/restore). Issue 18: patch 0035 (plain decode through the grouped kernel) end to end at short
# prompts (128 tokens) and bs 1/8/32/64 on kimi16 at real accept 3, base vs gdec (SGLANG_ENABLE_TRITON_GROUPED_DECODE=1),
# plain decode and EAGLE-3 (K 4) in each process, greedy parity. Session 27 measured it only at 8k prompts (1.17x /
# 1.59x at bs 1 / 8); 0035 goes default on only if no point here is slower.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
python3 -m sglang_fastpath warm-jit > $L/warm-jit.log 2>&1; say "$(tail -2 $L/warm-jit.log | head -1)"
CAP="{\"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64}"
$B --models $M/kimi16-acc3 --variant base=/tmp/site-fork --variant gdec=/tmp/site-fork \
  --variant-env gdec:SGLANG_ENABLE_TRITON_GROUPED_DECODE=1 --bs 1,8,32,64 --acc-len 0 --e2e-runs 2 \
  --server-args "$CAP" --name kimi16-short-gdec --budget-s $(left 570) > $L/a1.log 2>&1
say "gdec short rc=$?"
grep -h "decode attention: grouped" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head
pack s28a

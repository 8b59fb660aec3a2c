# session 29 device call C (issued at once after call B but answered by a fresh host: preflight and draw again, no warm-jit; slim bundle of commit b22eeab, patches 0001-0038): test/gpu/queue/s29b.sh as of that commit.
# session 29, call C (warm after s29d.sh). Issue 18: patch 0035 (plain decode through the grouped split-KV kernel,
# SGLANG_ENABLE_TRITON_GROUPED_DECODE=1) end to end at 128-token prompts, bs 1 / 8 / 32 / 64, fork (0036 on) vs gdec,
# plain decode and EAGLE-3 in each process, greedy parity. Session 27 measured 0035 at 8k only, before 0036 existed;
# 0035 goes default on only if no point is slower than the fork with 0036.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
CAP="{\"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64}"
$B --models $M/kimi16-acc3 --variant fork=/tmp/site-fork --variant gdec=/tmp/site-fork \
  --variant-env gdec:SGLANG_ENABLE_TRITON_GROUPED_DECODE=1 --bs 1,8,32,64 --acc-len 0 --e2e-runs 2 \
  --server-args "$CAP" --name kimi16-short-gdec --budget-s $(left 570) > $L/d1.log 2>&1
say "gdec short rc=$?"
grep -h "decode attention: grouped" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head
pack s29b

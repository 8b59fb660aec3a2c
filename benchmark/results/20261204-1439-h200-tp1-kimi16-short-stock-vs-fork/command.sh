# session 30 device call D (the third s30c.sh try: a warm host whose previous call, s30b.sh, had left an SGLang server running; this call first killed it, then ran the script; slim bundle of commit 9010cb9, patches 0001-0037 at their defaults): test/gpu/queue/s30c.sh as of that commit, after: pkill -9 -f '[l]aunch_server'; pkill -9 -f '[s]glang::'
# session 30, call C (warm after s30b.sh: kimi16-acc3 drawn). Issues 11 and 18: stock 0.5.17 vs the fork with 0035 on by
# default (session 29: MLA decode through the grouped split-KV kernel), 128-token prompts, bs 1 / 8 / 32 / 64, plain
# decode and EAGLE-3 (K 4, real accept 3), 3 timed runs a point. Session 29 turned 0035 on after a fork-vs-fork run in
# which bs 1 plain decode ran 1.3-1.8% slower with it (264.9 -> 260.3 tok/s); session 28's stock ran 263.0 there on
# another host. This checks "no fork figure below stock without speculation" side by side, with 0035 in.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
CAP="{\"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64}"
$B --models $M/kimi16-acc3 --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork --bs 1,8,32,64 --acc-len 0 \
  --e2e-runs 3 --server-args "$CAP" --name kimi16-short-stock-vs-fork-gdec --budget-s $(left 570) > $L/c1.log 2>&1
say "stock vs fork rc=$?"
grep -h "decode attention: grouped" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head
pack s30c

# session 31 device calls C (warm after call B) and C' (the same host, warm; the nometa variant alone, C's budget having skipped it); slim bundle of commit 83766f7, patches 0001-0038: test/gpu/queue/s31e.sh as of that commit; C' ran it after: sed -i 's/^V="--variant fork=.*/V="--variant nometa=\/tmp\/site-fork"/; 12d; s/left 560/left 290/' test/gpu/queue/s31e.sh
# session 31, call E (warm: kimi16-acc3 drawn; ~450 s). Issue 12's graph memory: session 30's stock-vs-fork run
# (benchmark/results/20261204-1439-h200-tp1-kimi16-short-stock-vs-fork/) logged the fork's target verify graphs at
# 0.99 GB against stock's 0.28 GB (K 4 only, max bs 64; decode and draft graphs equal). Which default-on verify patch
# holds the extra 0.71 GB: the fork at its defaults, then with 0021's in-graph acceptance, 0007's grouped verify
# kernel or 0017's in-graph metadata fill turned off, one at a time; bs 64 only, 64 new tokens, 1 run (the capture
# logs are what this is for; greedy parity comes with it).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
V="--variant fork=/tmp/site-fork --variant noacc=/tmp/site-fork --variant nogrp=/tmp/site-fork --variant nometa=/tmp/site-fork"
V="$V $(variant_env noacc SGLANG_ENABLE_VERIFY_ACCEPT_IN_GRAPH=0) $(variant_env nogrp SGLANG_ENABLE_TRITON_GROUPED_VERIFY=0)"
V="$V $(variant_env nometa SGLANG_ENABLE_TRITON_METADATA_IN_GRAPH=0)"
CAP="{\"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64}"
$B --models $M/kimi16-acc3 $V --bs 64 --acc-len 0 --e2e-runs 1 --output-len 64 --server-args "$CAP" \
  --name kimi16-verify-graph-memory --budget-s $(left 560) > $L/e1.log 2>&1
say "verify graph memory rc=$?"
for f in $BB/*/logs/e2e-*.log; do echo "== $f"; grep -h "Capture .* CUDA graph end" $f | sed 's/^\[[^]]*\] //' | cut -c1-120; done
pack s31e

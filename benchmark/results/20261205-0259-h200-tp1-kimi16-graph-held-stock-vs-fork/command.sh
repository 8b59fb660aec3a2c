# session 36 device call 1 (fresh nvidia-h200): test/gpu/queue/s34a.sh as committed at 0ef53df, run as 'bash test/gpu/queue/s34a.sh' (carry .carry: slim bundle with the sm90 JIT cache, .carry/stock-held)
# session 34, call A (fresh nvidia-h200, ~420 s: two engines, the first paying the host's compile; written in session 33,
# whose device call was lost to a host that stopped answering). Issue 12's K-set
# memory target ("graph memory for the whole K set <= 1.5x the single-K graph memory of stock at the same max bs")
# needs stock's figure by the count the fork's is read by. Session 32 found stock's free-memory drop cannot give it
# (0.07 GB for its verify capture under expandable segments, 0.28 GB without, against the fork's 0.69 GB kept:
# benchmark/results/20261204-1909-h200-tp1-kimi16-verify-graph-memory-expandable/). Here `stockheld` is stock 0.5.17
# with patch 0040's logging alone (benchmark/patches/stock-graph-memory-held.patch; its patched files carried in
# .carry/stock-held by test/gpu/stock_held_files.sh, run before the call, copied over a copy of the stock site),
# beside the fork as it installs (now with patch 0042: the Triton split-KV partials sized for decode rows, 64 at bs 64,
# not K 4 x 64 = 256); fixed K 4, graphs to bs 64, bs 64, 64 new tokens, 1 run. Expected from the code: stock near
# 1.00 GB (`graph_held_gb`; 268 MB of it the verify runner's unread partials), the fork ~0.20 GB below it.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
HELD=$(stock_held_site) || exit 3
V="--variant stockheld=$HELD --variant fork=/tmp/site-fork"
CAP="{\"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64}"
$B --models $M/kimi16-acc3 $V --bs 64 --acc-len 0 --e2e-runs 1 --output-len 64 --server-args "$CAP" \
  --name kimi16-graph-held-stock-vs-fork --budget-s $(left 560) > $L/a1.log 2>&1
say "graph held stock vs fork rc=$?"
for f in $BB/*/logs/e2e-*.log; do echo "== $f"; grep -h "CUDA graph end\|Built adaptive" $f | sed 's/^\[[^]]*\] //' | cut -c1-170; done
pack s34a

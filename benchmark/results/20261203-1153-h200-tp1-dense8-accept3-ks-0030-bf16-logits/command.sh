# session 22 device call(s) A, D (nvidia-h200, one host: A fresh, B-D warm); slim bundle of commit 6346e77 (patches 0001-0030), built with --jit-cache build/cache/jit/sm90.
# test/gpu/device_bench.sh (committed) defines B, ALL3, BF16, KSET, KOFF, SKIP0, draw and pack.
# ---- .devrun/s22a.sh
# session 22, call A (fresh nvidia-h200; bundle built with --jit-cache build/cache/jit/sm90; carry .carry .devrun;
# device_tree.sh hide before, restore after). dense-8 accept 3, graphs to bs 64: graph memory of the K set with all3
# + 0030 (bf16 verify logits), (1) started at K 4, (2) started at K 8 (the widest state captured first); against
# session 21's 0.90 GB (K set, all3) and 0.57 GB (fixed K 4). (3) dense-8 with the draft wrong 65% (accept ~1.4):
# the K set plus steps 0 (adaptive-ks-off.json) with steps 0's draft extend skipped: the turned-down state's upper
# bound. Greedy parity in each.
set -uo pipefail
source test/gpu/device_bench.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
$B --models $M/dense8-acc3 --variant all3=/tmp/site-fork $ALL3 $BF16 --bs 1,64 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 \
  --server-args "$KSET" --name dense8-ks-bf16-k4 --budget-s $(left 190) > $L/a1.log 2>&1; say "ks bf16 k4 rc=$?"
$B --models $M/dense8-acc3 --variant all3=/tmp/site-fork $ALL3 $BF16 --ks 8 --bs 1,64 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 \
  --server-args "$KSET" --name dense8-ks-bf16-k8start --budget-s $(left 360) > $L/a2.log 2>&1; say "ks bf16 k8 rc=$?"
draw dense8-miss65 dense --layers 8 --draft-miss-rate 0.65
$B --models $M/dense8-miss65 --variant all3=/tmp/site-fork $ALL3 $BF16 $SKIP0 --bs 1,64 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 \
  --server-args "$KOFF" --name dense8-miss65-koff-skip0 --budget-s $(left 560) > $L/a3.log 2>&1; say "koff skip0 rc=$?"
pack s22a
# ---- .devrun/s22d.sh
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
$B --models $M/dense8-acc3 --variant all3=/tmp/site-fork $ALL3 $BF16 --bs 1,64 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 \
  --server-args "$KSET" --name dense8-ks-bf16-k4 --budget-s $(left 200) > $L/d1.log 2>&1; say "ks bf16 k4 rc=$?"
$B --models $M/dense8-miss65 --variant all3=/tmp/site-fork $ALL3 $BF16 --bs 1,64 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 \
  --server-args "$KOFF" --name dense8-miss65-koff-sync --budget-s $(left 400) > $L/d2.log 2>&1; say "koff sync rc=$?"
pack s22d

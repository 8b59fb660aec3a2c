# session 21 device call(s) B (nvidia-h200); slim bundle of commit 6a9d57c (patches 0001-0029), built with --jit-cache build/cache/jit/sm90.
# test/gpu/device_bench.sh (committed) defines B, ALL3, KSET, draw and pack.
# ---- .devrun/s21b.sh
# session 21, call B (A's host, warm: issue it within 30 s of A's reply): dense-8's K set with all3 captured to bs 64
# (0028 and 0029's graph memory against session 19's 0.99 GB) beside fixed K 4 with none on (session 19: 0.57 GB);
# if A's fixed K 4 was cut short, rerun it first (uncomment).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
# draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
# $B --models $M/kimi16-acc3 --variant fixed=/tmp/site-fork --variant-env fixed:SGLANG_SPEC_CYCLE_STATS=1 --bs 1,8 --acc-len 0 \
#   --e2e-runs 2 --e2e-warmup-len 256 --server-args '{"mem_fraction_static": 0.65}' --name kimi16-fixed-k4 \
#   --budget-s $(left 250) > $L/fixed.log 2>&1; say "fixed rc=$?"
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
$B --models $M/dense8-acc3 --variant all3=/tmp/site-fork $ALL3 --bs 1,64 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 \
  --server-args "$KSET" --name dense8-ks-all3-0028-0029 --budget-s $(left 400) > $L/d8.log 2>&1; say "dense8 ks rc=$?"
$B --models $M/dense8-acc3 --variant fixed=/tmp/site-fork --variant-env fixed:SGLANG_SPEC_CYCLE_STATS=1 --bs 1,64 --acc-len 0 \
  --e2e-runs 2 --e2e-warmup-len 256 --name dense8-fixed-k4 --budget-s $(left 578) > $L/d8f.log 2>&1; say "dense8 fixed rc=$?"
pack s21b

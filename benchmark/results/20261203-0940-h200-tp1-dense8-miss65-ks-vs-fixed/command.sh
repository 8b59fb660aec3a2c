# session 21 device call(s) E (nvidia-h200); slim bundle of commit 6a9d57c (patches 0001-0029), built with --jit-cache build/cache/jit/sm90.
# test/gpu/device_bench.sh (committed) defines B, ALL3, KSET, draw and pack.
# ---- .devrun/s21e.sh
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw dense8-miss65 dense --layers 8 --draft-miss-rate 0.65
$B --models $M/dense8-miss65 --variant all3=/tmp/site-fork $ALL3 --bs 1,64 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 \
  --server-args "$KSET" --name dense8-miss65-ks-all3 --budget-s $(left 175) > $L/d15.log 2>&1; say "d15 rc=$?"
$B --models $M/dense8-miss65 --variant fixed=/tmp/site-fork --variant-env fixed:SGLANG_SPEC_CYCLE_STATS=1 --bs 1,64 --acc-len 0 \
  --e2e-runs 2 --e2e-warmup-len 256 --name dense8-miss65-fixed-k4 --budget-s $(left 290) > $L/d15f.log 2>&1; say "d15f rc=$?"
pack s21e

# session 20 device call E (nvidia-h200, warm host after a failed draw); slim bundle of commit 37bf523 (patches 0001-0027).
# test/gpu/device_bench.sh (committed) defines B, ALL3, KSET, draw and pack.
# ---- .devrun/s20e.sh
# call E (fresh host, ~330 s): dense-8 accept 1.5, adaptive K set with all3 beside plain decode, TP 1, bs 1,8,64
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
$B --models $M/dense8-acc3 --variant all3=/tmp/site-fork $ALL3 --bs 1,8 --acc-len 1.5 --e2e-runs 1 --e2e-warmup-len 256 \
  --server-args "$KSET" --name dense8-acc15-ks-all3 --budget-s $(left 200) > $L/ks15.log 2>&1; say "ks15 rc=$?"
pack s20e

# session 35, call E (warm after s35d.sh; ~450 s: one dense-8 engine with the K set + steps 0 on the throughput
# policy; written in session 35). Issue 12's target "EAGLE-3 >= no speculation at every bs in 1..64 at accept length
# 1.5" on dense-8, never run with the steps-0 switches: the draft wrong at 65% of positions (accept ~1.4),
# adaptive-ks-off.json, STEPS0_VARS (session 36 dropped 0043's lean cycle from it: no gain on dense-8 held at steps 0,
# benchmark/results/20261205-0311-h200-tp1-dense8-steps0-s0-vs-lean/), plain decode first in the same process, bs 1/8/32/64,
# 2 runs after a 256-token warm-up. Session 22 (patches 0001-0030, no steps-0 switches,
# benchmark/results/20261203-1157-h200-tp1-dense8-miss65-ks-off/): 0.68x / 0.67x plain decode at bs 1 / 64.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw dense8-miss65 dense --layers 8 --draft-miss-rate 0.65
V="--variant s0=/tmp/site-fork $(variant_env s0 $STEPS0_VARS)"
$B --models $M/dense8-miss65 $V --bs 1,8,32,64 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$KOFF" \
  --name dense8-miss65-koff-s0 --budget-s $(left 560) > $L/e1.log 2>&1
say "dense8 miss65 koff s0 rc=$?"
pack s35e

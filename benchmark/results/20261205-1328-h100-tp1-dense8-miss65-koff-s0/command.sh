# session 40 (one NVIDIA H100 80GB HBM3, nvidia-h100-x1; slim bundle of 0104bfa, patches 0001-0049), device call 4 on the warm host: bash test/gpu/queue/s35e.sh s0
# session 35, call E (warm after s35d.sh; ~450 s: one dense-8 engine with the K set + steps 0 on the throughput
# policy; written in session 35). Issue 12's target "EAGLE-3 >= no speculation at every bs in 1..64 at accept length
# 1.5" on dense-8, never run with the steps-0 switches: the draft wrong at 65% of positions (accept ~1.4),
# adaptive-ks-off.json, STEPS0_VARS (session 36 dropped 0043's lean cycle from it: no gain on dense-8 held at steps 0,
# benchmark/results/20261205-0311-h200-tp1-dense8-steps0-s0-vs-lean/), plain decode first in the same process, bs 1/8/32/64,
# 2 runs after a 256-token warm-up. `bash test/gpu/queue/s35e.sh off` runs the same with patches 0045-0047's off path
# (the policy's turned-down batches as plain decode cycles; switching to drafting and back), one variant a call. Session 22 (patches 0001-0030, no steps-0 switches,
# benchmark/results/20261203-1157-h200-tp1-dense8-miss65-ks-off/): 0.68x / 0.67x plain decode at bs 1 / 64.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw dense8-miss65 dense --layers 8 --draft-miss-rate 0.65
RUN=${1:-s0}  # s0: STEPS0_VARS; off: OFF_VARS (session 37's patches 0045-0047, the off path: run s37e.sh first)
case $RUN in
  s0) V="--variant s0=/tmp/site-fork $(variant_env s0 $STEPS0_VARS)" ;;
  off) V="--variant off=/tmp/site-fork $(variant_env off $OFF_VARS)" ;;
  *) echo "s35e.sh: s0 or off, not $RUN" >&2; exit 2 ;;
esac
$B --models $M/dense8-miss65 $V --bs 1,8,32,64 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$KOFF" \
  --name dense8-miss65-koff-$RUN --budget-s $(left 560) > $L/e1-$RUN.log 2>&1
say "dense8 miss65 koff $RUN rc=$?"
pack s35e-$RUN

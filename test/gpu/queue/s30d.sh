# session 30, call D (warm: kimi16-acc3 drawn), only if s30a.sh's sampler shows the cyclic collector taking a share of
# the steps-0 cycle's wall (its host line: "gc gen N: ... passes ... ms" per label). Issue 12: the same steps-0 engines
# as s30a.sh with and without Engine.freeze_gc() after the first warm-up (FASTPATH_BENCH_FREEZE_GC=1; every object
# alive after start-up leaves the collector's passes), plain decode in each process, bs 1 / 8, 3 runs, greedy parity.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
V="--variant s0=/tmp/site-fork --variant frozen=/tmp/site-fork"
V="$V $(variant_env s0 $STEPS0_VARS)"
V="$V $(variant_env frozen $STEPS0_VARS FASTPATH_BENCH_FREEZE_GC)"
$B --models $M/kimi16-acc3 $V --bs 1,8 --acc-len 0 --e2e-runs 3 --server-args "$S0_KIMI" \
  --name kimi16-steps0-freeze-gc --budget-s $(left 570) > $L/d1.log 2>&1
say "steps0 freeze gc rc=$?"
grep -h "Freezing GC\|Traceback" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | cut -c1-160 | sort | uniq -c | head
pack s30d

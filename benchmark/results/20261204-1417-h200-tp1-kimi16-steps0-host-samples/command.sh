# session 30 device call A (fresh nvidia-h200; slim bundle of commit 9010cb9, patches 0001-0037 at their defaults): test/gpu/queue/s30a.sh as of that commit.
# session 30, call A (fresh nvidia-h200; slim bundle, patches 0001-0037 at their defaults: 0035 on). Issue 12: where
# the host time of a steps-0 cycle goes beyond plain decode's. Sessions 28-29: the steps-0 cycle (0034 + 0037 on) takes
# 3.93 ms at bs 1 against plain decode's 3.76, but only 3.55 ms (GPU busy 3.33) in 8 profiled steps; the bonus-only
# relay (then 0038: three fewer stand-in writes) moved nothing. Sampling profiler of the scheduler loop over
# timed-size runs (2 per point), with the cyclic collector's passes per generation (a periodic pass would be missed by
# 8 profiled steps), and the cycle's per-phase GPU ms on the cycle_ms records. One variant, plain decode and steps 0
# in one process, bs 1 / 8. Session 29's try ran out of device time: on a fresh host this needs about 400 s (70 s
# preflight and draw, two engine starts of ~50 s, ~230 s planned for the runs); give it a full call.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
V="--variant s0=/tmp/site-fork $(variant_env s0 $STEPS0_VARS)"
$B --models $M/kimi16-acc3 $V --bs 1,8 --acc-len 0 --e2e-runs 3 --pysample-runs 2 --server-args "$S0_KIMI" \
  --name kimi16-steps0-host-samples --budget-s $(left 560) > $L/e1.log 2>&1
say "steps0 host samples rc=$?"
for d in $BB/*/raw/*-pysample; do python3 -m benchmark.tools.pysample "$d" --min-pct 4 > $L/pysample.txt 2>&1; done
grep -h "^==\|host:" $L/pysample.txt | cut -c1-400
python3 - <<'PY'
import glob, json
for f in glob.glob("/tmp/bench/*/raw/*.jsonl"):
    for line in open(f):
        r = json.loads(line)
        if r.get("type") == "record" and r["metric"] == "cycle_ms":
            print(r["mode"], r["bs"], "cycle_ms", round(r["value"], 3), {k: v for k, v in r["extra"].items() if k.endswith("_ms")})
PY
pack s30a

# session 42 device call 5 (warm host): bash test/gpu/queue/s40a.sh off64
# session 40, call A (fresh or warm nvidia-h200 / nvidia-h100-x1; ~230 s a variant: one dense-8 process each).
# `bash test/gpu/queue/s40a.sh` runs `off` and `coarse` (a warm host; on a fresh host give it `off` alone:
# `bash test/gpu/queue/s40a.sh off`), `bash test/gpu/queue/s40a.sh off64` the third variant in a later call. Issue 12: where the spec off path's
# cycle loses to plain decode. Session 40 (one H100,
# benchmark/results/20261205-1315-h100-tp1-dense8-steps0-held-off-path/): dense-8 held at steps 0, the off path ran
# 0.84x / 0.94x / 0.86x / 0.78x plain decode at bs 1 / 8 / 32 / 64, its cycle's GPU-event span 0.07-0.41 ms longer
# than a plain decode step, its runs 4-18% apart where plain decode's are 1%; no traces. Here the same model and
# config at bs 1 / 64, 256 new tokens, 2 runs, 12 torch-profiler steps a point (benchmark/trace_summary.py: GPU busy,
# timed idle, launches) and 3 runs a point under the scheduler-loop sampler (benchmark/pysample.py: where the off
# cycle's host time goes against plain decode's; on dense-8 at bs 1 the host is the critical path), plain decode first: `off` (OFF_VARS; since session 40's run 0045 hands the WAR barrier the
# DECODE replay's pre-replay event, as plain decode has, instead of one recorded after the whole off cycle), `coarse`
# (the same with SGLANG_FORCE_COARSE_WAR_BARRIER=1: the barrier waits for the whole forward, which is what the off path
# had before, for plain decode too in that process) and `off64` (the draft's KV rows written every 64 cycles instead
# of 16: the share of the periodic eager flush). Greedy parity in each.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
S0="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-steps0.json\"}"
for run in ${@:-off coarse}; do
  case $run in
    off) V="--variant off=/tmp/site-fork $(variant_env off $OFF_VARS)" ;;
    coarse) V="--variant coarse=/tmp/site-fork $(variant_env coarse $OFF_VARS SGLANG_FORCE_COARSE_WAR_BARRIER=1)" ;;
    off64) V="--variant off64=/tmp/site-fork $(variant_env off64 $OFF_VARS SGLANG_SPEC_KV_ONLY_DEFER_CYCLES=64)" ;;
  esac
  $B --models $M/dense8-acc3 $V --bs 1,64 --acc-len 0 --e2e-runs 2 --output-len 256 --profile-steps 12 --pysample-runs 3 \
    --server-args "$S0" --name dense8-steps0-held-$run-traces --budget-s $(left 560) > $L/a-$run.log 2>&1
  say "dense8 held at steps 0, $run traced rc=$?"
done
cycle_ms
summ
pack s40a

# session 40 (one NVIDIA H100 80GB HBM3, nvidia-h100-x1; slim bundle of 0104bfa, patches 0001-0049), device call 5 on the same warm host: bash test/gpu/queue/s37e.sh with the variant line edited to 'for run in lean'
# session 37, call E (fresh or warm nvidia-h200; ~480 s: one dense-8 process, two variants). Patches 0045-0047's
# first GPU run: the spec off path (SGLANG_SPEC_OFF_PATH) serves a batch the policy holds at steps 0 as a plain decode
# cycle (no spec inputs, relay or snapshot; the draft's KV rows kept in 0038's log). dense-8 at accept 3 with every
# bs held at steps 0 (benchmark/configs/adaptive-steps0.json), variants `off` (OFF_VARS: today's steps-0 switches
# plus the off path) and `lean` (LEAN_VARS: those plus 0043's lean steps-0 cycle), bs 1 / 8 / 32 / 64, 2 runs, plain decode first in each process.
# Expected: greedy output equal to plain decode's in both (real acceptance, so the harness checks it), the start-up
# line "Speculation off path: steps-0 batches run as plain decode cycles" for `off`, and `off` between `lean`
# and plain decode; the plan's estimate is 0.85-0.95x at bs 1
# (docs/spec-off-path-plan.md). Session 39 (one H100): the first run died in the decode log after ~40 off cycles
# (fixed in 0047); there `s0` ran 0.78x / 0.73x and 0043's `lean` 0.91x / 0.82x plain decode at bs 1 / 64
# (benchmark/results/20261205-1048-h100-tp1-dense8-steps0-lean-traces/), so the second variant is now `lean`, the
# better steps-0 cycle. On a fresh host give it `off` alone: `sed -i 's/for run in off lean/for run in off/' ...`.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
S0="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-steps0.json\"}"
for run in lean; do
  case $run in
    off) V="--variant off=/tmp/site-fork $(variant_env off $OFF_VARS)" ;;
    lean) V="--variant lean=/tmp/site-fork $(variant_env lean $LEAN_VARS)" ;;
  esac
  $B --models $M/dense8-acc3 $V --bs 1,8,32,64 --acc-len 0 --e2e-runs 2 --server-args "$S0" \
    --name dense8-steps0-held-$run --budget-s $(left 560) > $L/e-$run.log 2>&1
  say "dense8 held at steps 0, $run rc=$?"
done
grep -h "Speculation off path\|SGLANG_SPEC_OFF_PATH is ignored\|Traceback" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head
cycle_ms
summ
pack s37e

# session 36 device call 3 (warm): test/gpu/queue/s35d.sh as committed at 0ef53df
# session 35, call D (fresh or warm nvidia-h200, ~450 s: two dense-8 engines; written in session 35, which had no
# device). Issue 12 on dense-8, where the target's step is short (plain decode ~1.4 ms a token at bs 1) and a steps-0
# cycle's host time is the cycle: the steps-0 switches (STEPS0_VARS: 0034 KV-only draft write, 0037 steps 0 as a
# decode step, 0038 rows deferred 16 cycles) have never run on dense-8. Every bs held at steps 0
# (adaptive-steps0.json), plain decode first in each process, bs 1/8/32/64, 3 runs, one sampled run of the
# scheduler's stacks. Variants: `s0` (STEPS0_VARS) and `lean` (the same + patch 0043's SGLANG_SPEC_STEPS0_LEAN_CYCLE:
# bonus-only relay, host accept lengths, no bf16 upcast for argmax-only batches). Expected from kimi16's sampled
# stacks (benchmark/results/20261204-1417-h200-tp1-kimi16-steps0-host-samples/): s0 ~0.6x plain decode at bs 1
# (~1 ms more host a cycle), lean ~0.4-0.5 ms less host a cycle. Greedy parity steps 0 vs plain decode in each.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
S0="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-steps0.json\"}"
$B --models $M/dense8-acc3 $S0_VS_LEAN --bs 1,8,32,64 --acc-len 0 --e2e-runs 3 --pysample-runs 1 --server-args "$S0" \
  --name dense8-steps0-lean --budget-s $(left 560) > $L/d1.log 2>&1
say "dense8 steps0 s0 vs lean rc=$?"
for d in $BB/*/raw/*-pysample; do [ -d "$d" ] && python3 benchmark/pysample.py "$d" --min-pct 1.5; done > $BB/pysample.txt 2>&1
cycle_ms
pack s35d

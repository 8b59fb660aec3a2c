# session 35, call G (warm, kimi16-acc3 drawn; ~450 s: two kimi16 engines; written in session 35). Issue 12 on
# kimi16 at accept 1.5 is 1-2% short of plain decode (0.984 / 0.988 / 0.982 at bs 1 / 8 / 32, session 32); a
# steps-0 cycle with 0038's deferral ran at 0.977 / 0.990 of plain decode at bs 1 / 8 (session 31,
# benchmark/results/20261204-1648-h200-tp1-kimi16-steps0-deferred-kv/), its draft_extend phase 0.032 ms of GPU a
# cycle: four log copies, three zero stand-ins and a sixteenth of the batched write. Patch 0043 removes the
# stand-ins, halves the copies and drops the stash's three extra index_puts, two casts, a fill, a copy to the
# host and the logits upcast: about 12 small kernels a cycle. This cycle is GPU-bound, so what it can save is
# their GPU time (~1% at bs 1 if each costs ~3 us as the draft_extend phase suggests; session 29's relay-only test,
# 6 of them, showed nothing within +-0.01 ms). Every bs held at steps 0, plain decode first in each process,
# `s0` (STEPS0_VARS) vs `lean` (+ SGLANG_SPEC_STEPS0_LEAN_CYCLE), bs 1 / 8, 3 runs, greedy parity.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
$B --models $M/kimi16-acc3 $S0_VS_LEAN --bs 1,8 --acc-len 0 --e2e-runs 3 --server-args "$S0_KIMI" \
  --name kimi16-steps0-lean --budget-s $(left 560) > $L/g1.log 2>&1
say "kimi16 steps0 s0 vs lean rc=$?"
cycle_ms
pack s35g

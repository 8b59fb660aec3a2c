# session 41 device call 2 (warm host of call 1): bash test/gpu/queue/s38b.sh
# session 38, call B (warm, kimi16-acc3 drawn, e.g. after s38a.sh; ~420 s: two kimi16 engines). Issue 12 on kimi16
# at accept 1.5 is 1-2% short of plain decode (0.984 / 0.988 / 0.982 at bs 1 / 8 / 32, session 32); a steps-0 cycle
# with 0038's deferral ran at 0.977 / 0.990 of plain decode at bs 1 / 8 (session 31,
# benchmark/results/20261204-1648-h200-tp1-kimi16-steps0-deferred-kv/). Patches 0045-0047's off path serves a batch
# held at steps 0 as a plain decode cycle (no spec inputs, relay or snapshot; the draft's KV rows in 0038's log), so
# it should close that gap on the headline model if it closes it anywhere. Every bs held at steps 0 (S0_KIMI), plain
# decode first in each process, `s0` (STEPS0_VARS, today's steps-0 cycle) vs `off` (OFF_VARS), bs 1 / 8, 3 runs,
# greedy parity (EAGLE-3 vs plain decode in each; with every batch held at steps 0 the output must equal plain
# decode's). The off path ran on dense-8 in session 40 (benchmark/results/20261205-1315-h100-tp1-dense8-steps0-held-off-path/). If `off` reaches plain decode
# here, `s35g.sh` (0043 on kimi16) asks a question that no longer matters.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
V="--variant s0=/tmp/site-fork --variant off=/tmp/site-fork $(variant_env s0 $STEPS0_VARS) $(variant_env off $OFF_VARS)"
$B --models $M/kimi16-acc3 $V --bs 1,8 --acc-len 0 --e2e-runs 3 --server-args "$S0_KIMI" \
  --name kimi16-steps0-s0-vs-off --budget-s $(left 560) > $L/s38b.log 2>&1
say "kimi16 steps0 s0 vs off rc=$?"
grep -h "Speculation off path\|SGLANG_SPEC_OFF_PATH is ignored" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head
cycle_ms
pack s38b

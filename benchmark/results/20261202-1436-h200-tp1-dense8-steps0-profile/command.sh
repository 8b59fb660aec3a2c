# session 16 device call A, nvidia-h200, warm host after call B; slim bundle of commit 20edb74 (patches 0001-0024). .devrun/common.sh as in ../20261202-1139-h200-tp1-0023-parity-graphs-off/command.sh
# session 16, call A (fresh nvidia-h200; carry .carry .devrun; device_tree.sh hide before, restore after):
# issue 12: what does a steps-0 cycle (speculation turned down) do on the host that a decode step does not?
# adaptive-steps0.json holds every slot at steps 0; SKIP_ZERO_STEP skips its draft extend. One process: plain
# decode, then steps-0 EAGLE-3, bs 1/32/64, timed, then 12 profiled steps each; cycle_phases on the traces.

set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
say "start"
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-steps0.json\"}"
# s0: draft extend skipped (SKIP_ZERO_STEP); s0sync: the 1-token draft extend kept (a real EAGLE-3 draft needs it)
$B --models $M/dense8-acc3 --variant s0=/tmp/site-fork --variant-env s0:SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1 \
  --variant s0sync=/tmp/site-fork --bs 1,32,64 --acc-len 0 --e2e-runs 3 --profile-steps 12 --server-args "$AD" \
  --name s16-steps0-profile --budget-s $(left 570) > $L/s0.log 2>&1; say "steps0 rc=$?"
for v in s0 s0sync; do
  T=$(ls -d $BB/*/raw/e2e-$v-*traces 2>/dev/null | head -1)
  [ -n "$T" ] && timeout 60 python3 benchmark/cycle_phases.py $T/e2e_* --graphs --launches 12 --slow-calls > $BB/$v-phases.txt 2>&1
  head -12 $BB/$v-phases.txt 2>/dev/null
done
pack s16a
say end

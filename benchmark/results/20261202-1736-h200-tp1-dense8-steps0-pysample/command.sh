# session 17 device call C, nvidia-h200, warm host (after call A); slim bundle of commit f9a14a8.
# .devrun/common.sh as in ../20261202-1139-h200-tp1-0023-parity-graphs-off/command.sh
# session 17, call C (warm): where a steps-0 cycle's extra host time goes, in Python: benchmark/pysample.py's sampled
# scheduler stacks of plain decode and of steps 0 (draft extend kept, as a real draft needs), bs 1 and 64, dense-8.
# Session 16's trace put ~0.6 ms of the extra before the target forward and ~0.45 ms after it, mostly outside aten ops.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-steps0.json\"}"
$B --models $M/dense8-acc3 --variant s0sync=/tmp/site-fork --bs 1,64 --acc-len 0 --e2e-runs 2 --pysample-runs 2 \
  --server-args "$AD" --name s17-steps0-pysample --budget-s $(left 400) > $L/s0.log 2>&1; say "steps0 rc=$?"
for d in $BB/*/raw/*-pysample; do [ -d "$d" ] && python3 benchmark/pysample.py "$d" --min-pct 1.0; done > $BB/pysample.txt 2>&1
head -80 $BB/pysample.txt
pack s17c
say end

#!/usr/bin/env bash
# Device call on nvidia-h200 (2026-12-01 03:49), fresh host, from the repository root, slim bundle in
# .carry/bundle (sglang-fastpath bundle --out .carry/bundle --profile slim). The same call then ran
# the stock adaptive repro of ../20261201-0405-h200-tp1-dense8-adaptive-0014.
set -uo pipefail
M0=${SGLANG_FASTPATH_MODELS:-/tmp/fastpath-models}; mkdir -p $M0
( [ -f $M0/dense8/target/config.json ] || PYTHONPATH=$PWD/python python3 -m sglang_fastpath models dense --layers 8 --device cuda --out $M0/dense8 ) > /tmp/dense8.log 2>&1 &
DRAW=$!
source test/gpu/device_env.sh
wait $DRAW
python3 benchmark/run.py --profile all --kinds e2e --configs tp1 --backends triton --bs 1,8 \
  --ks 4 --topks 1 --e2e-runs 3 --acc-len 3 --pysample-runs 2 --profile-steps 12 \
  --variant fork=/tmp/site-fork --variant-env fork:SGLANG_SPEC_CYCLE_STATS=1 \
  --models $M/dense8 --out /tmp/bench1 --name tp1-dense8-cycle --no-plot
for d in /tmp/bench1/*/raw/*-pysample; do python3 benchmark/pysample.py "$d" --min-pct 1.5 > pysample.txt; done
# here, on the copied traces:
# python -m benchmark.tools.cycle_phases raw/e2e-fork-tp1-triton-traces/{e2e_nospec-bs1,e2e_spec-bs1,e2e_nospec-bs8,e2e_spec-bs8} \
#   --accept-len 3.012 --png timeline.png --json phases.json > phases.txt

# Call D (warm after call C: kimi16 drawn, sites installed): patch 0011 alone on kimi16, fork vs the
# same fork with SGLANG_SCHEDULER_BROADCAST_REQS_VIA_MQ=false (gloo), acc 3, bs 1 and 8, 3 runs,
# then the scheduler loop sampled (2 runs per bs).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_env.sh
mkdir -p "$OUT/logs"
timeout "$(left 400)" python3 benchmark/run.py --profile all --kinds e2e --configs tp2-pcie --backends triton \
  --bs 1,8 --acc-len 3 --e2e-runs 3 --pysample-runs 2 --server-args '{"mem_fraction_static": 0.65}' \
  --variant gloo=/tmp/site-fork --variant-env gloo:SGLANG_SCHEDULER_BROADCAST_REQS_VIA_MQ=false \
  --variant fork=/tmp/site-fork --models $M/kimi16 --out /tmp/benchd --name kimi16-mq-broadcast \
  --budget-s "$(left 395)" --no-plot 2>&1 | tail -14
for d in /tmp/benchd/*/raw/*-pysample; do [ -d "$d" ] && python3 benchmark/pysample.py "$d" --min-pct 2 > "$OUT/$(basename $d).txt" 2>&1; done
tar -C /tmp/benchd -czf "$OUT/benchd.tgz" . ; say end

# Call B (nvidia-h200-x2, warm after command-a.sh: kimi16 and the Marlin JIT cache on the host):
# the EAGLE-3 cycle on kimi16, fork as landed, tp2-pcie, triton attention, Marlin MoE,
# SGLANG_SIMULATE_ACC_LEN=3: no speculation vs EAGLE-3 e2e at bs 1, 8, 32 (2 timed runs each),
# then a torch-profiler trace of 12 scheduler steps per batch size on both ranks.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_env.sh
mkdir -p "$OUT/logs"
timeout "$(left 585)" python3 benchmark/run.py --profile all --kinds e2e --configs tp2-pcie --backends triton \
  --bs 1,8,32 --acc-len 3 --e2e-runs 2 --profile-steps 12 --server-args '{"mem_fraction_static": 0.65}' \
  --variant fork=/tmp/site-fork --models $M/kimi16 --out /tmp/bench --name kimi16-cycle \
  --budget-s "$(left 580)" --no-plot 2>&1 | tail -30
tar -C /tmp/bench -czf "$OUT/bench.tgz" . ; say end; ls -la "$OUT"

# Call (nvidia-h200-x2): (1) the gate's tp2-forced-and-graphed shard (patch 0002 now counts draft and
# draft-extend graph replays; 0003 collects layer lists itself), while dense-8 is drawn;
# (2) the skew experiment: EAGLE-3 vs no speculation e2e on dense-8 + oracle draft, bs 1, real acceptance,
# 5 timed runs per engine (median), fork with and without SGLANG_SET_CPU_AFFINITY=1, tp2-pcie and tp2.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_env.sh
mkdir -p "$OUT/logs"
( GATE_SHARDS=tp2-forced-and-graphed GATE_BUDGET_S=260 bash test/gpu/gate.sh > "$OUT/logs/gate.log" 2>&1; say "gate: $(tail -1 "$OUT/logs/gate.log")" ) &
GPID=$!
[ -f $M/dense8/target/config.json ] || python3 -m sglang_fastpath models dense --layers 8 --device cuda --out $M/dense8 > "$OUT/logs/dense8.log" 2>&1
wait $GPID
grep -h "passed\|failed\|FAIL" "$OUT/logs/gate.log" | tail -5
say "skew e2e"
timeout "$(left 585)" python3 benchmark/run.py --profile all --kinds e2e --configs tp2-pcie,tp2 --backends triton \
  --bs 1 --output-len 256 --acc-len 0 --e2e-runs 5 --server-args '{"disable_prefill_cuda_graph": false}' \
  --variant fork=/tmp/site-fork --variant aff=/tmp/site-fork --variant-env aff:SGLANG_SET_CPU_AFFINITY=1 \
  --models $M/dense8 --out /tmp/bench3 --name skew-affinity-dense8 --budget-s "$(left 580)" --no-plot 2>&1 | tail -24
tar -C /tmp/bench3 -czf "$OUT/bench.tgz" . ; say end
# Two more calls on the same warm host (preflight and dense-8 kept), one more round of the fork alone:
#   round2-tp2-pcie/:
#   python3 benchmark/run.py --profile all --kinds e2e --configs tp2-pcie,tp2 --backends triton --bs 1 --output-len 256 \
#     --acc-len 0 --e2e-runs 5 --server-args '{"disable_prefill_cuda_graph": false}' --variant fork=/tmp/site-fork \
#     --models $M/dense8 --out /tmp/bench4 --name skew-round2-dense8 --budget-s 235 --no-plot   (its tp2 job was skipped by budget)
#   round2-tp2/: the same with --configs tp2 --budget-s 150

# session 42, call A (fresh or warm nvidia-h200 / nvidia-h100-x1; ~380 s: three dense-8 processes, ~110 s each warm).
# Issue 12: why the spec off path held at steps 0 sometimes runs steadily at plain decode's rate and sometimes swings.
# Session 42 on one H100 host: `s40a.sh off` ran 0.976x / 0.994x plain decode at bs 1 / 64, steady
# (benchmark/results/20261205-1840-h100-tp1-dense8-steps0-held-off-traces/), while `s41b.sh`'s held run 17 minutes
# earlier ran 0.767x / 0.834x, its rate swinging between 323 and 521 tok/s from one 40-token log interval to the next
# while the same process's plain decode held 521-529 (benchmark/results/20261205-1822-h100-tp1-dense8-miss65-held-off/);
# session 41's 0.85x / 0.82x run swung the same way. Here: the same held config three times, one process each, back to
# back (no traces, no sampler: they would change the host load), with `top`, the GPU's clocks, throttle reasons and
# compute processes sampled every 2 s beside them ($L/top.log: what else takes the CPU or the GPU while a run swings) and the SGLang processes alive between runs
# ($L/between.log); after its timed runs each process runs 2 more under the scheduler-loop sampler, whose header counts
# the scheduler's involuntary context switches and GC passes (`python -m benchmark.pysample raw/*-pysample`). Read: each
# run's ratio, its phases' interval rates ($L/rates.txt, benchmark/tools/interval_rates.py), and what else ran on the CPU or the GPU in a run that swung.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
S0="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-steps0.json\"}"
(while true; do echo "== $(date +%T)"; top -b -n 1 -w 200 | sed -n '1,5p;7,22p'
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,utilization.gpu,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv,noheader; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
  sleep 2; done) > $L/top.log 2>&1 &
TOP=$!
for run in r1 r2 r3; do
  $B --models $M/dense8-acc3 --variant $run=/tmp/site-fork $(variant_env $run $OFF_VARS) --bs 1,64 --acc-len 0 \
    --e2e-runs 2 --output-len 256 --pysample-runs 2 --server-args "$S0" --name dense8-steps0-held-off-$run --budget-s $(left 570) \
    > $L/a-$run.log 2>&1
  say "held off $run rc=$?"
  { echo "== after $run $(date +%T)"; pgrep -af '[s]glang::|[l]aunch_server|[m]ultiprocessing' | cut -c1-200; } >> $L/between.log
done
kill $TOP 2>/dev/null
python3 -m benchmark.tools.interval_rates $BB/*/logs/e2e-*.log --min-intervals 3 > $L/rates.txt 2>&1
grep -c '\*\*yes\*\*' $L/rates.txt | xargs -I{} echo "phases that swing: {}"
summ
pack s42a

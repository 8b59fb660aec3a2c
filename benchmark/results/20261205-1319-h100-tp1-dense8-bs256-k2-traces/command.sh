# session 40 (one NVIDIA H100 80GB HBM3, nvidia-h100-x1; slim bundle of 0104bfa, patches 0001-0049), device call 2 on the warm host: bash test/gpu/queue/s39a.sh (variant k2)
# session 39, call A (fresh or warm nvidia-h200 / nvidia-h100-x1; ~400 s: two dense-8 processes). Issue 12 at bs 256:
# session 39's s37d (benchmark/results/20261205-1046-h100-tp1-dense8-ks-bs256-graph-hit/) replayed a verify graph at
# every step to bs 256, but EAGLE-3 at K 2 ran 0.46x plain decode there: the cycle's GPU events sum to 5.75 ms and the
# decode ran at ~16 ms a cycle (bs 128 at K 3: 4.56 ms, back to back). Here the same model at bs 128 / 256, 256 new
# tokens, 2 runs, 12 torch-profiler steps a point (benchmark/trace_summary.py: GPU busy and idle share, host gaps),
# variants `k2` (fixed K 2, no adaptive policy: is it the cycle itself?) and `ks` (the K set of
# adaptive-ks-bs256.json, as s37d: is it the policy?), plain decode first in each process, greedy parity.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
for run in k2 ks; do
  case $run in
    k2) ARGS="{\"cuda_graph_max_bs_decode\": 256}" ;;
    ks) ARGS="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-bs256.json\", \"cuda_graph_max_bs_decode\": 256}" ;;
  esac
  V="--variant $run=/tmp/site-fork $(variant_env $run $ALL3_BF16_VARS)"
  $B --models $M/dense8-acc3 $V --e2e-k 2 --bs 128,256 --acc-len 0 --e2e-runs 2 --output-len 256 --profile-steps 12 \
    --server-args "$ARGS" --name dense8-bs256-k2-$run-traces --budget-s $(left 560) > $L/a-$run.log 2>&1
  say "dense8 bs 256 $run rc=$?"
done
cycle_ms
summ
pack s39a

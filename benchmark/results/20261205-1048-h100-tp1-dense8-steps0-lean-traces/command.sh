# session 39 device call 3 (warm nvidia-h100-x1 after s37d): test/gpu/queue/s36c.sh as committed at 6da8805
# session 36, call C (warm or fresh nvidia-h200; ~420 s: two dense-8 engines). Issue 12 on dense-8, where a steps-0
# cycle runs 0.75 / 0.85 / 0.88 / 0.97x plain decode at bs 1 / 8 / 32 / 64 and patch 0043's lean cycle made it no
# faster (0.68 / 0.83 / 1.03 / 0.68x; bs 64: 2.27 ms of CUDA-event time a cycle against 1.99), all from
# benchmark/results/20261205-0311-h200-tp1-dense8-steps0-s0-vs-lean/, whose sampled stacks are 0.6-0.9-s windows
# that cannot split a cycle. Here the same pair and hold (adaptive-steps0.json), bs 1 / 64, 2 runs, then 12
# torch-profiler steps a point (benchmark/trace_summary.py: GPU busy and idle share of the cycle, the kernels and
# host gaps) for plain decode and both variants: where the ~0.5 ms a token over plain decode goes at bs 1, and what
# 0043 adds at bs 64. One candidate to look for: eagle_prepare_for_decode's per-cycle H2D copies of kv lengths from
# pageable host tensors (`torch.tensor(...).to(device, non_blocking=True)`), which CUDA may stage with a stream sync.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
S0="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-steps0.json\"}"
$B --models $M/dense8-acc3 $S0_VS_LEAN --bs 1,64 --acc-len 0 --e2e-runs 2 --profile-steps 12 --server-args "$S0" \
  --name dense8-steps0-lean-traces --budget-s $(left 560) > $L/c1.log 2>&1
say "dense8 steps0 traces rc=$?"
cycle_ms
summ
pack s36c

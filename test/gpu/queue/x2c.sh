# x2 call C (warm after x2b.sh on nvidia-h200-x2; written in session 33). Issue 11's host-gap target: kimi with 4
# layers (`models kimi --layers 4`, 384 experts, the model where host cost shows most) at tp2-pcie, accept 3, stock
# 0.5.17 against the fork (all3 + bf16 logits, fixed K 4), bs 1 / 8, 3 runs a point, 12 profiled steps a point on
# both ranks (benchmark/trace_summary.py: each rank's GPU busy and idle share of an EAGLE-3 cycle's wall time).
# Target: GPU idle <= 15% of a cycle's wall time at bs 1, on both TP ranks.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi4 kimi --layers 4
$B2 --models $M/kimi4 --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork \
  $(variant_env fork $ALL3_BF16_VARS) --bs 1,8 --acc-len 3 --e2e-runs 3 --profile-steps 12 \
  --server-args '{"mem_fraction_static": 0.65, "cuda_graph_max_bs_decode": 16}' --name kimi4-tp2pcie-fork-vs-stock \
  --budget-s $(left 570) > $L/x2c.log 2>&1
say "x2c rc=$?"
pack x2c

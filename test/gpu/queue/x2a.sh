# x2 call A (fresh nvidia-h200-x2; slim bundle with --jit-cache build/cache/jit/sm90; carry .carry;
# device_tree.sh hide/restore). Issue 11's first x2 item: the headline kimi16 at tp2-pcie (custom all-reduce off,
# NCCL_P2P_DISABLE=1), stock 0.5.17 against the fork (all3 + bf16 logits, fixed K 4, the best at accept 3), accept 3
# (SGLANG_SIMULATE_ACC_LEN=3), bs 1 / 8, 3 runs, 12 profiled steps a point (traces: GPU-bound ratio), greedy parity.
# Targets: fork EAGLE-3 >= 1.7x stock no-spec at bs 1, >= 1.5x at bs 8; measured / GPU-bound >= 90%.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16 kimi --layers 16 --routed-experts 96
python3 -m sglang_fastpath warm-jit > $L/warm-jit.log 2>&1; say "$(tail -2 $L/warm-jit.log | head -1)"
$B2 --models $M/kimi16 --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork \
  $(variant_env fork $ALL3_BF16_VARS) --bs 1,8 --acc-len 3 --e2e-runs 3 --profile-steps 12 \
  --server-args '{"mem_fraction_static": 0.65, "cuda_graph_max_bs_decode": 16}' --name kimi16-tp2pcie-fork-vs-stock \
  --budget-s $(left 570) > $L/x2a.log 2>&1
say "x2a rc=$?"
pack x2a

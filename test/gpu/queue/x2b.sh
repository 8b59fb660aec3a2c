# x2 call B (warm after x2a.sh on nvidia-h200-x2; written in session 33). Issue 11's dense-8 and spec-off targets at
# tp2-pcie (custom all-reduce off, NCCL_P2P_DISABLE=1): dense-8 (`models dense --layers 8`, accept 3 pinned by
# SGLANG_SIMULATE_ACC_LEN) stock 0.5.17 against the fork (all3 + bf16 logits, fixed K 4), bs 1 / 8 / 32 / 64,
# 2 runs a point, 8 profiled steps a point (the GPU-bound ratio from traces). Targets: fork EAGLE-3 >= 2.5x stock
# no-speculation at bs 1; no fork figure below stock with speculation off at bs 1..64 (each e2e job runs both engines);
# greedy parity at TP 2 (the e2e jobs' output digests).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw dense8 dense --layers 8
$B2 --models $M/dense8 --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork \
  $(variant_env fork $ALL3_BF16_VARS) --bs 1,8,32,64 --acc-len 3 --e2e-runs 2 --profile-steps 8 \
  --server-args '{"cuda_graph_max_bs_decode": 64}' --name dense8-tp2pcie-fork-vs-stock \
  --budget-s $(left 570) > $L/x2b.log 2>&1
say "x2b rc=$?"
pack x2b

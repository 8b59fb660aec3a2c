#!/usr/bin/env bash
# Device calls on nvidia-h200 (2026-12-01), from the repository root, slim bundle in .carry/bundle,
# after `source test/gpu/device_env.sh` (installs /tmp/site-fork and /tmp/site-stock) and
# `python3 -m sglang_fastpath models dense --layers 8 --device cuda --out $M/dense8`.
# Call 1 (stock 0.5.17, before the fix):
export CUDA_LAUNCH_BLOCKING=1
PYTHONPATH=/tmp/site-stock:$PWD/python python3 adaptive_repro.py $M/dense8 stock adaptive
PYTHONPATH=/tmp/site-stock:$PWD/python python3 adaptive_repro.py $M/dense8 stock-fixed8 fixed8
unset CUDA_LAUNCH_BLOCKING
# Call 3 (the fork with 0014):
B="python3 benchmark/run.py --profile all --kinds e2e --configs tp1 --backends triton --ks 4 --topks 1 --models $M/dense8 --out /tmp/bench3 --no-plot --variant fork=/tmp/site-fork"
$B --bs 1,8 --acc-len 0 --e2e-runs 1 --name adaptive-real --server-args '{"speculative_adaptive": true}'
$B --bs 1,8,32,64 --acc-len 3 --e2e-runs 2 --name adaptive-acc3 --server-args '{"speculative_adaptive": true}'
$B --bs 1,8,32,64 --acc-len 3 --e2e-runs 2 --name fixed-acc3
# Call 4 (the fork with 0014):
python3 adaptive_parity.py $M/dense8

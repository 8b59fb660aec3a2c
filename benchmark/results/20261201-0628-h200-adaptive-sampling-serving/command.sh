#!/usr/bin/env bash
# Device calls A and C on nvidia-h200 (2026-12-01 session 8), from the repository root, slim bundle
# in .carry/bundle (patches 0001-0017). Call A on a fresh host; call C's serving bench on the warm one.
source test/gpu/device_env.sh
python3 -m sglang_fastpath models dense --layers 8 --device cuda --out $M/dense8 &   # for call B
bash test/gpu/run_on_device.sh test/gpu/test_adaptive_gpu.py
bash test/gpu/run_on_device.sh test/gpu/test_sampling_distribution_gpu.py -s
# call C (the last 160 s of it; cut by the call's time limit while the EAGLE-3 server loaded)
python3 -m benchmark.tools.serving_bench --models $M/dense8 --concurrency 1,8 --out /tmp/cc/serving

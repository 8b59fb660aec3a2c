#!/usr/bin/env bash
# Device calls on nvidia-h200 (2026-12-01), from the repository root, slim bundle in .carry/bundle.
source test/gpu/device_env.sh
# call 2 (test before a518e00, serving_bench before 51c23fd):
bash test/gpu/run_on_device.sh test/gpu/test_sampling_distribution_gpu.py
python3 -m sglang_fastpath models dense --layers 8 --device cuda --out $M/dense8
python3 -m benchmark.tools.serving_bench --models $M/dense8 --out /tmp/serving
# call 4 (after a518e00; cut at 240 s):
bash test/gpu/run_on_device.sh test/gpu/test_sampling_distribution_gpu.py -s

#!/usr/bin/env bash
# Device call C of 2026-12-01 session 10 (nvidia-h200, fresh host), from the repository root, slim bundle in .carry/bundle
# (0001-0021 with 0007 as committed in 9acc37b: the tuning knobs, the old defaults) and .carry/flashmla.zip
# (FlashMLA ops library from sglang-kernel 0.4.5: benchmark/attn_verify_bench.py --pack-flashmla WHEEL ZIP). The sweep part of .devrun/s10c.sh:
source test/gpu/device_env.sh
python3 -m sglang_fastpath models dense --layers 8 --device cuda --out $M/dense8   # for the e2e part of the call
timeout 175 python3 benchmark/attn_verify_bench.py --out /tmp/attn --sweep-full --budget-s 140 --no-extend --flashmla-so .carry/flashmla.zip
# here, after the call: the new defaults (patch 0007 after this run) at the 12 points, looked up in results.json
# (needs build/sglang from `sglang-fastpath source`):
# python3 benchmark/results/20261201-2041-h200-attn-verify-sweep/new_defaults_check.py > new-defaults-at-the-sweep-points.txt

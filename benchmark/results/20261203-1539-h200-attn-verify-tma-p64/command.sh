#!/usr/bin/env bash
# Device call E of 2026-12-03 session 23 (nvidia-h200, fresh host), from the repository root at commit fc97db4 (the page-64 TMA
# prototype); slim bundle built without --jit-cache; run with .carry and .devrun carried.
# ---- .devrun/s23e.sh
# session 23, call E (fresh nvidia-h200; slim bundle without the JIT cache; carry .carry .devrun; device_tree.sh hide
# before, restore after). Issue 18: the page-64 TMA prototype (sgl-kernel/fastpath_kernels/attention_tma) checked and timed
# beside patch 0007's kernel on the same 64-token pages, H 8/32, bs 1/8, ctx 1k/8k/32k, K 4.
set -uo pipefail
source test/gpu/device_env.sh
PYTHONPATH=sgl-kernel:$PYTHONPATH timeout 170 python3 -m fastpath_kernels.attention_tma.bench --out $OUT/tma --budget-s 110 \
  > $OUT/tma-stdout.log 2>&1; say "tma rc=$?"
tail -40 $OUT/tma-stdout.log

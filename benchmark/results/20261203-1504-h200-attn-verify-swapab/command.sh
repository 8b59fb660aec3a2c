#!/usr/bin/env bash
# Device call D of 2026-12-03 session 23 (nvidia-h200, fresh host), from the repository root at commit 5bd84ee (patch 0007 with
# the swap-AB stage 1, swap_ab default off); slim bundle built without --jit-cache; run with .carry and .devrun carried.
# ---- .devrun/s23d.sh
# session 23, call D (fresh nvidia-h200; slim bundle without the JIT cache; FlashMLA left out: the bundle and its 3-MB zip pass the 64-MiB carry limit, its figures at these points are session 10s; carry
# .carry .devrun; device_tree.sh hide before, restore after). Issue 18: patch 0007's swap-AB stage 1 (swap_ab, the KV
# tokens as the MMA's M axis, default off) timed beside the default tile, SGLang's decode kernel and FlashMLA at the 12
# points (H 32/8, bs 1/8, ctx 1k/8k/32k, K 4), plus the quick stage A with the six swap tiles at 4 points.
set -uo pipefail
source test/gpu/device_env.sh
timeout 230 python3 benchmark/attn_verify_bench.py --out $OUT/attn --budget-s 200 \
  > $OUT/attn-stdout.log 2>&1; say "attn rc=$?"
tail -60 $OUT/attn-stdout.log

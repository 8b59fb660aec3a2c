# session 36 device call 4 (warm nvidia-h200): test/gpu/queue/s34c.sh as committed at 0ef53df
# session 34, call C (warm after s34b.sh on nvidia-h200, ~300 s; written in session 33). Issue 18's 50%-of-HBM target:
# the warp-specialized Gluon prototype (sgl-kernel/fastpath_kernels/attention_ws: one TMA producer warp feeding an
# mbarrier ring, two consumer warpgroups; cross-compiled only) on its first GPU: its gpu tests (stage 1 + 0007's merge
# against float64, chain and tree masks, partial pages, CUDA-graph replay), then the bench beside patch 0032's
# TMA kernel (42.7% of HBM at H 8, bs 8, 32k in session 23) at H 8/32, bs 1/8, ctx 1k/8k/32k, K 4. A hang in the
# mbarrier ring shows as the pytest timeout; the bench then does not run.
set -uo pipefail
source test/gpu/device_env.sh
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu test/test_verify_attention_ws.py > $OUT/ws-gpu-tests.log 2>&1
say "ws gpu tests rc=$?"; tail -15 $OUT/ws-gpu-tests.log
if grep -q " passed" $OUT/ws-gpu-tests.log && ! grep -q "failed\|error" $OUT/ws-gpu-tests.log; then
  PYTHONPATH=sgl-kernel:$PYTHONPATH timeout 260 python3 -m fastpath_kernels.attention_ws.bench --out $OUT/ws \
    --budget-s 200 > $OUT/ws-bench.log 2>&1
  say "ws bench rc=$?"; tail -40 $OUT/ws-bench.log
fi

# session 36 device call 4b (the same warm host, right after): the tiles and shapes around the 50%-of-HBM line
source test/gpu/device_env.sh; PYTHONPATH=sgl-kernel:$PYTHONPATH timeout 200 python3 -m fastpath_kernels.attention_ws.bench --out $OUT/ws2 --heads 8,16 --bs 4,8,16 --ctx 8192,16384,32768 --variants n32b3,n32b4,n32b4-r40,n64b2 --budget-s 150 > $OUT/ws2-bench.log 2>&1; echo rc=$?; tail -25 $OUT/ws2-bench.log

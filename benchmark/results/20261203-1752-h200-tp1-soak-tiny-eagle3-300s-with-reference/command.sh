# session 24 device calls A (fresh nvidia-h200) and B (A's host, warm); slim bundle with the sm90 JIT cache of commit c7297f7 (patches 0001-0031), built by: .venv/bin/sglang-fastpath bundle --out .carry/bundle --profile slim --jit-cache build/cache/jit/sm90; carry .carry .devrun; test/gpu/device_tree.sh hide/restore around the calls
# --- call A: .devrun/s24a.sh
# session 24, call A (fresh nvidia-h200, slim bundle; carry .carry .devrun; device_tree.sh hide/restore). Issue 14: the
# 5-minute soak at 64 clients on the tiny pair, TP 1, EAGLE-3 server (its no-speculation reference is call B).
set -uo pipefail
source test/gpu/device_bench.sh; rm -rf $BB/*
draw tiny tiny
python3 -m benchmark.soak --out $BB/soak-tiny-eagle3 --duration-s 300 --clients 64 \
  --launch "--model-path $M/tiny/target --speculative-algorithm EAGLE3 --speculative-draft-model-path $M/tiny/draft \
--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 \
--attention-backend triton --sampling-backend pytorch --grammar-backend none --enable-metrics" > $L/soak.log 2>&1
say "soak rc=$?"; tail -14 $L/soak.log
cp -r $L $BB/; tar czf $OUT/s24a.tgz -C $BB .
# --- call B: .devrun/s24b.sh
# session 24, call B (A's host, warm). Issue 14: the same 5-minute soak without speculation (the reference for A's ITL p99).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw tiny tiny
python3 -m benchmark.soak --out $BB/soak-tiny-nospec --duration-s 300 --clients 64 \
  --launch "--model-path $M/tiny/target --attention-backend triton --sampling-backend pytorch --grammar-backend none \
--enable-metrics" > $L/soak.log 2>&1
say "soak rc=$?"; tail -14 $L/soak.log
# issue 18: the TMA prototype's interpreter cases compiled on the GPU (INDEX_AHEAD 3, fp16/bf16, a graph replay)
timeout 150 python3 -m pytest -q -m gpu test/test_verify_attention_tma.py > $L/tma-gpu-test.log 2>&1; say "tma gpu test rc=$?"
tail -5 $L/tma-gpu-test.log
cp -r $L $BB/; tar czf $OUT/s24b.tgz -C $BB .

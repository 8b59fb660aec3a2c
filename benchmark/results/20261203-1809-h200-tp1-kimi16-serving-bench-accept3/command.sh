# session 24 device call C (nvidia-h200, warm host after calls A and B); slim bundle with the sm90 JIT cache of commit c7297f7 (patches 0001-0031), built by: .venv/bin/sglang-fastpath bundle --out .carry/bundle --profile slim --jit-cache build/cache/jit/sm90; carry .carry .devrun; test/gpu/device_tree.sh hide/restore around the call
# serving_bench then sent one warm-up request per concurrency (the benchmark's default); it now sends 'concurrency' of them
# session 24, call C (warm host with the JIT cache bundle, i.e. the kimi bundle: --jit-cache build/cache/jit/sm90). Issue 11's
# last TP 1 item: SGLang's own serving benchmark (python -m sglang.benchmark.serving, random-ids, fixed seed) against the
# real server, no speculation then EAGLE-3 (K 4, topk 1), kimi16 at real accept 3, beside the Engine figures.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
export SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 SGLANG_TRITON_SHARED_GRAPH_STATE=1 SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=1
timeout $(left 560) python3 -m benchmark.tools.serving_bench --models $M/kimi16-acc3 --out $BB/serving-kimi16 \
  --concurrency 1,8 --input-len 128 --output-len 256 --acc-len 0 --seed 1 -- --mem-fraction-static 0.65 > $L/serving.log 2>&1
say "serving rc=$?"; tail -20 $L/serving.log
cp -r $L $BB/; tar czf $OUT/s24c.tgz -C $BB .

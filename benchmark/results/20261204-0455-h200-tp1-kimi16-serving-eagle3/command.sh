# session 27 device call C (nvidia-h200, warm after call B); the same bundle (patches 0001-0036; the serving path does not use 0036's switch).
# session 27, call C (warm after B). Issue 11: SGLang's own serving benchmark on kimi16 at real accept 3, concurrency
# 1 / 8 / 32, EAGLE-3 and no speculation (benchmark.tools.serving_bench, with the stall watch); session 25 ran out of
# budget before EAGLE-3's points. cuda_graph_max_bs 32 shortens the server start-up.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
export SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 SGLANG_TRITON_SHARED_GRAPH_STATE=1 SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=1
timeout $(left 570) python3 -m benchmark.tools.serving_bench --models $M/kimi16-acc3 --out $BB/serving-kimi16 \
  --concurrency 1,8,32 --input-len 128 --output-len 256 --acc-len 0 --seed 1 --modes eagle3,nospec -- --mem-fraction-static 0.65 \
  --cuda-graph-max-bs-decode 32 > $L/serving.log 2>&1
say "serving rc=$?"; tail -8 $L/serving.log
python3 -c "import json; d=json.load(open('$BB/serving-kimi16/serving.json')); [print(r['mode'], r['concurrency'], r.get('output_tokens_per_s'), r.get('stalls')) for r in d['records']]"
cp -r $L $BB/; tar czf $OUT/s27c.tgz -C $BB .

# session 31, call C (warm after s31b.sh, same host). Issue 11: the no-speculation server of the same serving benchmark
# (same prompts by seed, same pre-warm, concurrency 1 / 8 / 32), to set beside s31b.sh's EAGLE-3 points.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
export SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 SGLANG_TRITON_SHARED_GRAPH_STATE=1 SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=1
timeout $(left 570) python3 -m benchmark.tools.serving_bench --models $M/kimi16-acc3 --out $BB/serving-kimi16-nospec \
  --concurrency 1,8,32 --input-len 128 --output-len 256 --acc-len 0 --seed 1 --modes nospec -- \
  --mem-fraction-static 0.65 --cuda-graph-max-bs-decode 32 > $L/serving.log 2>&1
say "serving rc=$?"; tail -8 $L/serving.log
python3 -c "import json; d=json.load(open('$BB/serving-kimi16-nospec/serving.json')); [print(r['mode'], r['concurrency'], r.get('prewarm'), r.get('output_tokens_per_s'), r.get('p99_ttft_ms'), r.get('stalls')) for r in d['records']]"
cp -r $L $BB/; tar czf $OUT/s31c.tgz -C $BB .

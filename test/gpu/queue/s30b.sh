# session 30, call B (warm after s30a.sh: kimi16-acc3 drawn). Issue 11: SGLang's serving benchmark on kimi16 at real accept 3
# again, now with serving_bench's untimed pre-warm run (--prewarm-prompts 32): session 27's concurrency-1 EAGLE-3 point
# (1.34x) held one request's 1.85-s first-use stall. EAGLE-3 first, concurrency 1 / 8 / 32.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
export SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 SGLANG_TRITON_SHARED_GRAPH_STATE=1 SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=1
timeout $(left 570) python3 -m benchmark.tools.serving_bench --models $M/kimi16-acc3 --out $BB/serving-kimi16 \
  --concurrency 1,8,32 --input-len 128 --output-len 256 --acc-len 0 --seed 1 --modes eagle3,nospec -- \
  --mem-fraction-static 0.65 --cuda-graph-max-bs-decode 32 > $L/serving.log 2>&1
say "serving rc=$?"; tail -8 $L/serving.log
python3 -c "import json; d=json.load(open('$BB/serving-kimi16/serving.json')); [print(r['mode'], r['concurrency'], r.get('prewarm'), r.get('output_tokens_per_s'), r.get('p99_ttft_ms'), r.get('stalls')) for r in d['records']]"
cp -r $L $BB/; tar czf $OUT/s30b.tgz -C $BB .

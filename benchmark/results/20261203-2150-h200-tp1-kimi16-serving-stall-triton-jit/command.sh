# session 25 device call B (nvidia-h200; a FRESH host: call C's host had been given back before this call reached it); slim bundle with the sm90 JIT cache of commit 5b5480f (patches 0001-0034), built by: .venv/bin/sglang-fastpath bundle --out .carry/bundle --profile slim --jit-cache build/cache/jit/sm90; carry .carry .devrun; test/gpu/device_tree.sh hide/restore around the call. The call's budget (left 500) ran out during EAGLE-3's concurrency-1 point: timeout ended serving_bench (rc 124) before it wrote serving.json
# session 25, call B (A's host, warm). Issue 11: SGLang's serving benchmark again on kimi16 at real accept 3 (session 24
# saw one 11-s stall at concurrency 8): now with 'concurrency' warm-up requests and the stall watch (stack dumps of every
# server and client process into their logs when the server log is quiet 3 s while a client runs), concurrency 1, 8, 32.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
export SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 SGLANG_TRITON_SHARED_GRAPH_STATE=1 SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=1
timeout $(left 500) python3 -m benchmark.tools.serving_bench --models $M/kimi16-acc3 --out $BB/serving-kimi16 \
  --concurrency 1,8,32 --input-len 128 --output-len 256 --acc-len 0 --seed 1 -- --mem-fraction-static 0.65 > $L/serving.log 2>&1
say "serving rc=$?"; tail -8 $L/serving.log
python3 -c "import json; d=json.load(open('$BB/serving-kimi16/serving.json')); [print(r['mode'], r['concurrency'], r.get('stalls')) for r in d['records']]"
cp -r $L $BB/; tar czf $OUT/s25b.tgz -C $BB .

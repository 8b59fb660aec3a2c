# session 31, calls B and C (warm: kimi16-acc3 drawn): `bash test/gpu/queue/s31b.sh eagle3`, then at once on the same
# host `bash test/gpu/queue/s31b.sh nospec`. Issue 11: SGLang's serving benchmark on kimi16 at real accept 3, with
# serving_bench's untimed pre-warm run (--prewarm-prompts 32), one server a call (same prompts by seed). Session 30 ran both in one call (then s30b.sh) and ran out of it: on a fresh host the
# EAGLE-3 server took 136 s to start (first-use compile), its pre-warm 66 s and each point 30-41 s (the client's imports),
# and the budget's SIGTERM fell inside the second server's start-up. serving_bench now stops its server and keeps
# serving.json on SIGTERM; session 30's EAGLE-3 points (c1 389.5, c8 1561.4, c32 4112.3 tok/s) had no nospec beside them.
set -uo pipefail
MODE=${1:?eagle3 or nospec}
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
export SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 SGLANG_TRITON_SHARED_GRAPH_STATE=1 SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=1
timeout $(left 570) python3 -m benchmark.tools.serving_bench --models $M/kimi16-acc3 --out $BB/serving-kimi16-$MODE \
  --concurrency 1,8,32 --input-len 128 --output-len 256 --acc-len 0 --seed 1 --modes $MODE -- \
  --mem-fraction-static 0.65 --cuda-graph-max-bs-decode 32 > $L/serving.log 2>&1
say "serving rc=$?"; tail -8 $L/serving.log
python3 -c "import json; d=json.load(open('$BB/serving-kimi16-$MODE/serving.json')); [print(r['mode'], r['concurrency'], r.get('prewarm'), r.get('output_tokens_per_s'), r.get('p99_ttft_ms'), r.get('stalls')) for r in d['records']]"
cp -r $L $BB/; tar czf $OUT/s31b-$MODE.tgz -C $BB .

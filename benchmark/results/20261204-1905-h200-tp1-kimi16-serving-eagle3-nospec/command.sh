# session 32 device call C (warm after calls A-B; slim bundle of commit 907b485, patches 0001-0040): bash test/gpu/queue/s32b.sh (MODE eagle3,nospec, the default) as of that commit
# session 32, call B (was session 31's s31b.sh, not reached) (warm: kimi16-acc3 drawn; ~440 s): `bash test/gpu/queue/s32b.sh` runs both servers, EAGLE-3 first;
# `bash test/gpu/queue/s32b.sh nospec` (or eagle3) runs one, to finish a call cut short. Issue 11: SGLang's serving
# benchmark on kimi16 at real accept 3, with serving_bench's untimed pre-warm run (--prewarm-prompts 32), same prompts
# by seed. Session 30's try (then s30b.sh) was answered by a fresh host: preflight, draw and a 136-s first server start
# (first-use compile) left too little, and the budget's SIGTERM fell inside the second server's start-up; on a warm host
# the EAGLE-3 half took ~236 s (start ~50 s, pre-warm 66 s, points 30-41 s each, mostly the client's imports), so both
# fit one call. serving_bench now stops its server and keeps serving.json on SIGTERM. Session 30's EAGLE-3 points
# (c1 389.5, c8 1561.4, c32 4112.3 tok/s) had no nospec beside them.
set -uo pipefail
MODE=${1:-eagle3,nospec}
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
export SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 SGLANG_TRITON_SHARED_GRAPH_STATE=1 SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=1
timeout $(left 570) python3 -m benchmark.tools.serving_bench --models $M/kimi16-acc3 --out $BB/serving-kimi16-${MODE/,/-} \
  --concurrency 1,8,32 --input-len 128 --output-len 256 --acc-len 0 --seed 1 --modes $MODE -- \
  --mem-fraction-static 0.65 --cuda-graph-max-bs-decode 32 > $L/serving.log 2>&1
say "serving rc=$?"; tail -8 $L/serving.log
python3 -c "import json; d=json.load(open('$BB/serving-kimi16-${MODE/,/-}/serving.json')); [print(r['mode'], r['concurrency'], r.get('prewarm'), r.get('output_tokens_per_s'), r.get('p99_ttft_ms'), r.get('stalls')) for r in d['records']]"
cp -r $L $BB/; tar czf $OUT/s32b-${MODE/,/-}.tgz -C $BB .

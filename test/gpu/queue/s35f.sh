# session 35, call F (warm: kimi16-acc3 drawn; ~450 s a mode; written in session 35, which had no device). Issue 12:
# the adaptive K choice under a moving load, switches included, in SGLang's own serving benchmark. Besides the
# concurrency points (1, 8, 32: all requests at once), two --traffic points: 128 requests arriving as a Poisson
# process at 4 and 16 a second (the same arrival times for every server, by seed), prompt and output lengths drawn
# in 1/4..1 of 128 / 256, at most 32 in flight, so the batch size moves over 1-32 and the slots switch.
#   bash test/gpu/queue/s35f.sh eagle3 ks     EAGLE-3 with the K set (adaptive-ks.json, throughput policy)
#   bash test/gpu/queue/s35f.sh eagle3 fixed  EAGLE-3 at fixed K 4
#   bash test/gpu/queue/s35f.sh nospec        no speculation
# one call each (a kimi16 server's start, pre-warm and five points take ~4-5 min on a warm host; session 32's
# s32b.sh). Real acceptance 3 (the acc3 draft), the shared-graph switches exported for every server (they touch
# only speculation). Read: TPOT p50 / p99 and E2E p50 per rate (traffic table), EAGLE-3's ratio over no
# speculation, and the slot switches in the server log (`Adaptive throughput slot`).
set -uo pipefail
MODE=${1:-eagle3}; CONF=${2:-ks}
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
for v in $ALL3_BF16_VARS; do export "$v=1"; done  # the shared-graph switches, bf16 logits, cycle stats
E3=""
[ "$CONF" = ks ] && E3="--speculative-adaptive --speculative-adaptive-config $PWD/benchmark/configs/adaptive-ks.json"
NAME=serving-kimi16-traffic-$MODE$([ "$MODE" = eagle3 ] && echo "-$CONF")
timeout $(left 570) python3 -m benchmark.tools.serving_bench --models $M/kimi16-acc3 --out $BB/$NAME \
  --concurrency 1,8,32 --traffic 4,16 --input-len 128 --output-len 256 --acc-len 0 --seed 1 --modes $MODE \
  --eagle3-args "$E3" -- --mem-fraction-static 0.65 --cuda-graph-max-bs-decode 32 > $L/serving.log 2>&1
say "serving $NAME rc=$?"; tail -12 $L/serving.log
grep -h "Adaptive throughput slot\|Switch adaptive" $BB/$NAME/server-*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | cut -c1-160 | tail -20
cp -r $L $BB/; tar czf $OUT/s35f-$NAME.tgz -C $BB .

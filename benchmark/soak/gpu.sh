#!/usr/bin/env bash
# Soak the fork's EAGLE-3 server on the tiny pair (SOAK_PAIR=dense8: the 8-layer Llama-3-8B-shaped
# pair), then the same server without speculation (the reference), on one GPU, in one device call
# (from the repository root, slim bundle in .carry/bundle):
#   [SOAK_PAIR=tiny|dense8] bash benchmark/soak/gpu.sh [DURATION_S] [more 'python3 -m benchmark.soak' arguments]
# DURATION_S is the load time of each of the two runs (default 90: the bundle install, two starts,
# two soaks and their drains fit the 10-minute call). Writes $OUT/soak/soak.json and both server
# logs; exit status is the soak's (0 all targets met, 1 a target missed, 3 the server did not start).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 3
# shellcheck source=test/gpu/device_env.sh
source test/gpu/device_env.sh
DURATION=${1:-90}
[ $# -gt 0 ] && shift
PAIR=${SOAK_PAIR:-tiny}
case "$PAIR" in
  tiny) MAKE=(tiny) ;;
  dense8) MAKE=(dense --layers 8 --device cuda) ;;
  *) echo "SOAK_PAIR must be tiny or dense8, not $PAIR"; exit 3 ;;
esac
if [ ! -f "$M/$PAIR/target/config.json" ]; then
  python3 -m sglang_fastpath models "${MAKE[@]}" --out "$M/$PAIR" > "$OUT/models.log" 2>&1 || { tail -20 "$OUT/models.log"; exit 3; }
fi
say "models ready in $M/$PAIR; soaking ${DURATION}s with EAGLE-3, then ${DURATION}s without"
python3 -m benchmark.soak --out "$OUT/soak" --duration-s "$DURATION" --reference \
  --launch "--model-path $M/$PAIR/target --speculative-algorithm EAGLE3 --speculative-draft-model-path $M/$PAIR/draft \
--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 \
--attention-backend triton --sampling-backend pytorch --grammar-backend none" "$@"

# session 42, call D (fresh or warm nvidia-h200 / nvidia-h100-x1; ~240 s a mode: two dense-8 processes; one mode a call:
# `bash test/gpu/queue/s42d.sh held`, then `... k4`). Patches 0054 and 0055 on their first GPU run: the speculative KV
# reservation topped up in chunks of 16 slots at page size 1 (SGLANG_SPEC_KV_RESERVE_CHUNK=16; 0054 then skips the
# top-up on the cycles in between), against the same engine topping up every cycle. dense-8 is where the host time
# shows: `held` = dense8-acc3 held at steps 0 with the off path (session 42: 0.976x / 0.994x plain decode at bs 1 / 64,
# benchmark/results/20261205-1840-h100-tp1-dense8-steps0-held-off-traces/), variants `every` and `chunk16`; `k4` =
# fixed K 4 at accept 3 with the graph-memory switches (a verify commits ~3 tokens a request), variants `every` and
# `chunk16`. bs 1 / 64, 256 new tokens, 2 runs, plain decode first in each process. Read: chunk16 / every at each bs
# (each against its own process's plain decode), greedy parity in each.
set -uo pipefail
MODE=${1:?usage: s42d.sh held|k4}
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
case $MODE in
  held) VARS=$OFF_VARS
        SA="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-steps0.json\"}" ;;
  k4) VARS=$ALL3_BF16_VARS; SA="{}" ;;
  *) echo "s42d.sh: held or k4, not $MODE" >&2; exit 2 ;;
esac
for run in every chunk16; do
  EXTRA=""; [ $run = chunk16 ] && EXTRA=SGLANG_SPEC_KV_RESERVE_CHUNK=16
  $B --models $M/dense8-acc3 --variant $run=/tmp/site-fork $(variant_env $run $VARS $EXTRA) --bs 1,64 --acc-len 0 \
    --e2e-runs 2 --output-len 256 --server-args "$SA" --name dense8-$MODE-topup-$run --budget-s $(left 570) \
    > $L/d-$MODE-$run.log 2>&1
  say "$MODE $run rc=$?"
done
summ
pack s42d-$MODE

# session 42, call B (warm nvidia-h200 / nvidia-h100-x1 with kimi16 drawn, ~480 s: two kimi16 processes, ~215 s each;
# on a fresh host give it one variant: `bash test/gpu/queue/s42b.sh grouped`, then `... ws` in the next call).
# Issue 18: patch 0044's warp-specialized verify attention against the default verify kernel (0007's grouped split-KV,
# what a user gets without any switch) in the kimi16 cycle at 16k, the side-by-side session 42 lacked: it measured ws
# against 0032's TMA kernel (EAGLE-3 1.021x / 1.043x at bs 1 / 4,
# benchmark/results/20261205-1830-h100-tp1-kimi16-p64-16k-1024-ws/). Same settings as `s41a.sh`: kimi16-acc3,
# --page-size 64, 16k-token prompts, 1024 new tokens, bs 1 / 4, K 4, 1 run, plain decode first in each process. The
# start-up line must say "grouped split-KV kernel (4 draft tokens)" for the EAGLE-3 engine of `grouped` and "MLA by a
# warp-specialized kernel" for `ws`. Read: ws / grouped EAGLE-3 decode rate at bs 1 and 4 (with the plain engines'
# rates equal across the two processes), greedy parity in each. If ws wins at both bs, 0044 is a candidate for
# default on sm_90.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
P64="{\"page_size\": 64, \"mem_fraction_static\": 0.65}"
for run in ${@:-grouped ws}; do
  case $run in
    grouped) V="--variant grouped=/tmp/site-fork" ;;
    ws) V="--variant ws=/tmp/site-fork $(variant_env ws SGLANG_ENABLE_TRITON_TMA_VERIFY SGLANG_ENABLE_TRITON_WS_VERIFY)" ;;
    *) echo "s42b.sh: grouped or ws, not $run" >&2; exit 2 ;;
  esac
  $B --models $M/kimi16-acc3 $V --bs 1,4 --prompt-len 16384 --output-len 1024 --acc-len 0 --e2e-runs 1 \
    --e2e-warmup-len 16 --server-args "$P64" --name kimi16-p64-16k-1024-$run --budget-s $(left 570) > $L/b-$run.log 2>&1
  say "$run e2e rc=$?"
done
grep -h "Triton target verify attention\|warp-specialized MLA verify attention not used\|Chunked prefix cache is turned on" \
  $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head
summ
pack s42b

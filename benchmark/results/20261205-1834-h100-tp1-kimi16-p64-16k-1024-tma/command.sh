# session 42 device call 4 (warm host): bash test/gpu/queue/s41a.sh tma
# session 41, call A: `bash test/gpu/queue/s41a.sh ws`, then in the next call on the warm host `... tma` (~300 s each
# with kimi16 drawn; a fresh host adds ~45 s for the draw and 60-100 s of first compiles: give it one variant). Issue 18
# end to end: patch 0044's warp-specialized verify attention (SGLANG_ENABLE_TRITON_WS_VERIFY) against patch 0032's TMA
# kernel in the kimi16 cycle, accept 3, --page-size 64, 16k-token prompts, bs 1 / 4, K 4, 1024 new tokens, 1 run,
# plain decode first in each process; greedy parity EAGLE-3 vs plain decode in each. Session 41's `s37b.sh ws`
# (benchmark/results/20261205-1537-h100-tp1-kimi16-p64-16k-ws/) served the verify with 0044 and kept greedy output, but
# recorded no decode rate: 128 new tokens took ~0.6 s of a 5.1-s call (the decode must be 25% of a call,
# MIN_DECODE_SHARE). Now patch 0048's chunked-prefix MHA is on by default (16k prefill ~1.8 s instead of ~4.5 s on an
# H100). 1024 new tokens keep the decode over a quarter of each call at bs 4 too (EAGLE-3 there: ~4.6 s of decode
# against ~7.2 s of prefill), so `decode_tokens_per_s` is recorded (else a `decode_rate_skipped` line says why). The start-up line must say "MLA by
# a warp-specialized kernel" for ws and "MLA KV tiles by TMA" for tma, and "Chunked prefix cache is turned on." in both.
set -uo pipefail
RUN=${1:?usage: s41a.sh ws|tma}
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
P64="{\"page_size\": 64, \"mem_fraction_static\": 0.65}"
case $RUN in
  ws) V="--variant ws=/tmp/site-fork $(variant_env ws SGLANG_ENABLE_TRITON_TMA_VERIFY SGLANG_ENABLE_TRITON_WS_VERIFY)" ;;
  tma) V="--variant tma=/tmp/site-fork $(variant_env tma SGLANG_ENABLE_TRITON_TMA_VERIFY)" ;;
  *) echo "s41a.sh: ws or tma, not $RUN" >&2; exit 2 ;;
esac
$B --models $M/kimi16-acc3 $V --bs 1,4 --prompt-len 16384 --output-len 1024 --acc-len 0 --e2e-runs 1 \
  --e2e-warmup-len 16 --server-args "$P64" --name kimi16-p64-16k-1024-$RUN --budget-s $(left 560) > $L/a-$RUN.log 2>&1
say "$RUN e2e rc=$?"
grep -h "MLA by a warp-specialized\|MLA KV tiles by TMA\|warp-specialized MLA verify attention not used\|Chunked prefix cache is turned on" \
  $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head
summ
pack s41a-$RUN

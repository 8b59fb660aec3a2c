# session 41 device call 1 (fresh nvidia-h100-x1 host): bash test/gpu/queue/s37b.sh ws
# session 37, call B: `bash test/gpu/queue/s37b.sh ws` then, in the next call on the warm host, `... tma` (~380 s
# each with the model drawn; +45 s for the draw and +60-100 s of first compiles on a fresh host: there give it `ws`
# alone). Issue 18 end to end: patch 0044's warp-specialized verify attention (SGLANG_ENABLE_TRITON_WS_VERIFY) against
# patch 0032's TMA kernel in the kimi16 cycle, accept 3, --page-size 64, 16k-token prompts, bs 1 / 4, K 4, 128 new
# tokens, 1 run, plain decode first in each process. Session 37 (benchmark/results/20261205-0525-h200-tp1-kimi16-p64-
# 16k-tma-partial/): tma at bs 1 decoded at 388.4 tok/s against plain decode's 224.8; a 16k prefill takes ~4.2 s, so
# bs 8 with 2 runs did not fit one call. The kernel alone at H 64 is not measured; at H 32 bs 8 32k the ws kernel took
# 168 us against 0032's 267 (benchmark/results/20261205-0316-h200-attn-verify-ws-gluon/), so expect a few percent of
# a ~5-ms cycle at 16k. The warm-up at each bs is 16 tokens (prefill dominates; the full-length default would add
# two 16k prefills per engine and bs); greedy parity EAGLE-3 vs plain decode in each; the start-up line must say
# "MLA by a warp-specialized kernel" for ws and "MLA KV tiles by TMA" for tma.
set -uo pipefail
RUN=${1:?usage: s37b.sh ws|tma}
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
P64="{\"page_size\": 64, \"mem_fraction_static\": 0.65}"
case $RUN in
  ws) V="--variant ws=/tmp/site-fork $(variant_env ws SGLANG_ENABLE_TRITON_TMA_VERIFY SGLANG_ENABLE_TRITON_WS_VERIFY)" ;;
  tma) V="--variant tma=/tmp/site-fork $(variant_env tma SGLANG_ENABLE_TRITON_TMA_VERIFY)" ;;
  *) echo "s37b.sh: ws or tma, not $RUN" >&2; exit 2 ;;
esac
$B --models $M/kimi16-acc3 $V --bs 1,4 --prompt-len 16384 --output-len 128 --acc-len 0 --e2e-runs 1 \
  --e2e-warmup-len 16 --server-args "$P64" --name kimi16-p64-16k-$RUN --budget-s $(left 560) > $L/b-$RUN.log 2>&1
say "$RUN e2e rc=$?"
grep -h "MLA by a warp-specialized\|MLA KV tiles by TMA\|warp-specialized MLA verify attention not used" \
  $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head
summ
pack s37b-$RUN

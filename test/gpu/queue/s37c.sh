# session 37, call C (fresh or warm nvidia-h200; ~560 s: three kimi16 engines, bs 64, 64 tokens, 2 runs; on a fresh
# host give it `stock` and `fork` only: `sed -i 's/for run in stock fork kset/for run in stock fork/' ...` and `kset`
# in the next call). Whether the bs-64 EAGLE-3 figures of sessions 36-37 carried first-use compiles: with a 16-token
# warm-up, every EAGLE-3 engine that ran first on its host read low at bs 64 (stock 0.83x / 0.82x its plain decode,
# the fork's K set 1.08x / 1.00x), the next one high (the row-held K set 1.31x / 1.29x), with the same K choices and
# graphs (benchmark/results/20261205-0511-h200-tp1-kimi16-graph-held-gc-stock-kset-rows256/). The harness now warms up
# each bs with a call as long as the timed one (its default since session 37), and this runs stock first again: if
# the order was the cause, stock's EAGLE-3 reads well above 0.82x, the K set near the row-held set's 1.29x, and the
# fork-vs-stock ratio at bs 64 (1.56x in session 36) comes out smaller. `stock` = stock 0.5.17 with 0040's logging
# (benchmark/patches/stock-graph-memory-held.patch, files from test/gpu/stock_held_files.sh, run before the call);
# `fork` = the fork as it installs, fixed K 4; `kset` = the fork with ALL3 + BF16 and adaptive-ks.json.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
HELD=$(stock_held_site) || exit 3
CAP="\"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64"
for run in stock fork kset; do
  case $run in
    stock) V="--variant stockheld=$HELD"; ARGS="{$CAP}" ;;
    fork) V="--variant fork=/tmp/site-fork"; ARGS="{$CAP}" ;;
    kset) V="--variant fork=/tmp/site-fork $(variant_env fork $ALL3_BF16_VARS)"
      ARGS="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\", $CAP}" ;;
  esac
  $B --models $M/kimi16-acc3 $V --bs 64 --acc-len 0 --e2e-runs 2 --output-len 64 --server-args "$ARGS" \
    --name kimi16-bs64-full-warmup-$run --budget-s $(left 560) > $L/c-$run.log 2>&1
  say "bs64 full warm-up $run rc=$?"
done
cycle_ms
summ
pack s37c

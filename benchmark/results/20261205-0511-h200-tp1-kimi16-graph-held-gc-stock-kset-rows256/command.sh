# session 37 device calls 1 (fresh host) and 2 (warm): test/gpu/queue/s36a.sh as committed at 1964592, run twice:
#   call 1: sed -i 's/for run in stock kset rows256 fixed/for run in stock kset/' test/gpu/queue/s36a.sh  (stock ran; kset skipped for budget, ~283 s needed, 176 left)
#   call 2: sed -i 's/for run in stock kset; do/for run in kset rows256 fixed; do/' test/gpu/queue/s36a.sh  (kset, rows256 ran; fixed skipped, ~253 s needed, 105 left)
# session 36, call A (fresh or warm nvidia-h200; ~560 s: four kimi16 engines, 64 tokens each; on a fresh host run
# `stock` and `kset` only: `sed -i 's/for run in stock kset rows256 fixed/for run in stock kset/' test/gpu/queue/s36a.sh`
# and the other two in the next call). Issue 12's K-set memory target (the whole K set <= 1.5x stock's single K at the
# same max bs) on patch 0040's count with garbage collected before each reading (session 36's fix): without it every
# EAGLE-3 engine's first capture read negative buffers, the ~0.70 GB that SGLang's freeze_gc() collected inside the
# window (benchmark/results/20261205-0305-h200-tp1-kimi16-graph-held-kset-rows256-fixed/). `stock` = stock 0.5.17 with
# 0040's logging alone (benchmark/patches/stock-graph-memory-held.patch, its files carried in .carry/stock-held by
# test/gpu/stock_held_files.sh, run before the call) at K 4; `kset` / `rows256` / `fixed` = the fork with the ALL3 +
# BF16 switches and adaptive-ks.json / adaptive-ks-rows256.json / fixed K 4. Graphs to bs 64, bs 64, 64 new tokens, 1
# run each. Expected from session 36's differences: every capture's buffers >= 0; fixed ~0.45 GB, rows256 ~0.53, kset
# ~0.98; stock unknown (session 36: 0.12 + its garbage).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
HELD=$(stock_held_site) || exit 3
FORK="--variant fork=/tmp/site-fork $(variant_env fork $ALL3_BF16_VARS)"
CAP="\"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64"
ADAPT="\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs"
for run in stock kset rows256 fixed; do
  V=$FORK
  case $run in
    stock) V="--variant stockheld=$HELD"; ARGS="{$CAP}" ;;
    kset) ARGS="{$ADAPT/adaptive-ks.json\", $CAP}" ;;
    rows256) ARGS="{$ADAPT/adaptive-ks-rows256.json\", $CAP}" ;;
    fixed) ARGS="{$CAP}" ;;
  esac
  $B --models $M/kimi16-acc3 $V --bs 64 --acc-len 0 --e2e-runs 1 --output-len 64 --server-args "$ARGS" \
    --name kimi16-graph-held-gc-$run --budget-s $(left 560) > $L/a-$run.log 2>&1
  say "graph held (gc) $run rc=$?"
done
for f in $BB/*/logs/e2e-*.log; do echo "== $f"; grep -h "graph pool grew\|Built adaptive" $f | sed 's/^\[[^]]*\] //' | cut -c1-170; done
pack s36a

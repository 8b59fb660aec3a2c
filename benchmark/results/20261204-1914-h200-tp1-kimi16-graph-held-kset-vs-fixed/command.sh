# session 32 device calls E (warm after D; the kset invocation skipped for budget: ~283 s needed, 280 left) and E' (the same host, warm, kset alone); slim bundle of commit 907b485, patches 0001-0040: test/gpu/queue/s32e.sh as of that commit; E' ran it after: sed -i 's/for run in kset fixed; do/for run in kset; do/; s/left 280/left 370/' test/gpu/queue/s32e.sh
# session 32, call E (warm: kimi16-acc3 drawn; ~330 s), if time is left after s32c.sh. Issue 12's K-set memory target
# ("graph memory for the whole K set <= 1.5x the single-K graph memory of stock at the same max bs") on patch 0040's
# allocator-proof figure: the fork with the adaptive K set (adaptive-ks.json, K 2/3/4/6/8) and the fork at fixed K 4,
# each its own benchmark invocation (the K set is a server argument), graphs to bs 64, the ALL3 + BF16 switches that
# share capture streams, graph state, aux hidden buffers and bf16 logits; results.json's graph_held_gb of each, beside
# graph_memory_gb (the free-memory drop that moved 0.25 GB between identical starts in session 31). Stock's single-K
# figure comes from s32c.sh.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
V="--variant fork=/tmp/site-fork $(variant_env fork $ALL3_BF16_VARS)"
KSET64="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\", \"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64}"
CAP="{\"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64}"
for run in kset fixed; do
  ARGS=$CAP; [ $run = kset ] && ARGS=$KSET64
  $B --models $M/kimi16-acc3 $V --bs 64 --acc-len 0 --e2e-runs 1 --output-len 64 --server-args "$ARGS" \
    --name kimi16-graph-held-$run --budget-s $(left 280) > $L/e-$run.log 2>&1
  say "graph held $run rc=$?"
done
python3 - <<'PY2'
import glob, json
for f in sorted(glob.glob("/tmp/bench/*/results.json")):
    for r in json.load(open(f))["records"]:
        if r["metric"] in ("graph_memory_gb", "graph_held_gb"):
            print(f.split("/")[-2], r["mode"], r["bs"], r["metric"], r["value"])
PY2
for f in $BB/*/logs/e2e-*.log; do echo "== $f"; grep -h "graph pool grew" $f | sed 's/^\[[^]]*\] //' | cut -c1-160; done
pack s32e

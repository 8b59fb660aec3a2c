# session 36 device calls 2 and 5 (warm): test/gpu/queue/s34b.sh as committed at 0ef53df ran kset and rows256 and skipped fixed for budget (~253 s needed, 229 left); call 5 ran fixed alone on the same warm host after:
#   sed 's/for run in kset rows256 fixed/for run in fixed/; s/left 560/left 262/' test/gpu/queue/s34b.sh > /tmp/s34bf.sh && bash /tmp/s34bf.sh
# session 34, call B (warm after s34a.sh: kimi16-acc3 drawn; ~450 s, three invocations; written in session 33). Issue
# 12's K-set memory target (the whole K set <= 1.5x stock's single K, s34a.sh's stockheld figure) with patches 0041
# and 0042. Session 32 (benchmark/results/20261204-1914-h200-tp1-kimi16-graph-held-kset-vs-fixed/, patches 0001-0040):
# the full K set (adaptive-ks.json) kept 1.56 GB, fixed K 4 0.72, same ALL3 + BF16 switches; of the K set's extra
# 0.84 GB, 0.32 were buffers sized for K 8 x bs 64 = 512 rows. Patch 0042 sizes the Triton split-KV partials, which
# only decode forwards read, for 64 decode rows (537 -> 67 MB); expected: the full K set ~1.09 GB, fixed K 4 ~0.52.
# The row-held K set (benchmark/configs/adaptive-ks-rows256.json: K 6 / 8 only to bs 32, so patch 0041 sizes the
# shared logits buffer for 256 rows and the K-8 state captures only to bs 32) shows what keeping long chains off
# large batches adds. Graphs to bs 64, bs 64, 64 new tokens, 1 run each; greedy parity with the slots switching.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
V="--variant fork=/tmp/site-fork $(variant_env fork $ALL3_BF16_VARS)"
CAP="\"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64"
ADAPT="\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs"
for run in kset rows256 fixed; do
  case $run in
    kset) ARGS="{$ADAPT/adaptive-ks.json\", $CAP}" ;;
    rows256) ARGS="{$ADAPT/adaptive-ks-rows256.json\", $CAP}" ;;
    fixed) ARGS="{$CAP}" ;;
  esac
  $B --models $M/kimi16-acc3 $V --bs 64 --acc-len 0 --e2e-runs 1 --output-len 64 --server-args "$ARGS" \
    --name kimi16-graph-held-$run --budget-s $(left 560) > $L/b-$run.log 2>&1
  say "graph held $run rc=$?"
done
for f in $BB/*/logs/e2e-*.log; do echo "== $f"; grep -h "graph pool grew\|CUDA graph end\|Built adaptive" $f | sed 's/^\[[^]]*\] //' | cut -c1-170; done
pack s34b

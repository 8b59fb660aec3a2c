# session 19 device calls A (fresh nvidia-h200) and B (fresh host again: the first host was given back while call A's results were read); slim bundle of commit a49ba4f (patches 0001-0027).
# .devrun/common.sh as in ../20261202-1139-h200-tp1-0023-parity-graphs-off/command.sh
# ---- .devrun/s19a.sh
# session 19, call A (fresh nvidia-h200; carry .carry .devrun; device_tree.sh hide before, restore after):
# first GPU run of patches 0026 (SGLANG_TRITON_SHARED_GRAPH_STATE) and 0027 (SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN):
# greedy parity under real rejection (tiny pair, 30% misses) with 0024+0026+0027; warm-jit in the background on
# cores 8-15 for call C's kimi16; draw kimi16 and dense8; then, with what time is left, dense-8 adaptive K set
# with all three at bs 1,8 (graph memory and speed; call B repeats it beside fixed K4 on a quiet host).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
say start
grep -q "warm-jit rc=0" $L/warmjit.log 2>/dev/null || { ( taskset -c 8-15 python3 -m sglang_fastpath warm-jit > $L/warmjit.log 2>&1; echo "warm-jit rc=$?" >> $L/warmjit.log ) & }
ALL3="--variant-env all3:SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 --variant-env all3:SGLANG_TRITON_SHARED_GRAPH_STATE=1 --variant-env all3:SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=1 --variant-env all3:SGLANG_SPEC_CYCLE_STATS=1"
OUT=$BB/gate timeout $(left 330) taskset -c 0-7 python3 -m pytest -q -p no:cacheprovider test/gpu/test_parity.py \
  -k "rejected_drafts and shared_graph_memory" > $BB/parity-shared-graph-memory.txt 2>&1
say "parity rc=$?"; tail -3 $BB/parity-shared-graph-memory.txt
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
wait; say "$(tail -1 $L/warmjit.log)"
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\"}"
$B --models $M/dense8-acc3 --variant all3=/tmp/site-fork $ALL3 --bs 1,8 \
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$AD" --name s19-dense8-ks-all3-bs8 \
  --budget-s $(left 570) > $L/ks.log 2>&1; say "ks rc=$?"
for d in $BB/*/logs; do echo "== $d"; grep -h "Switch adaptive\|Adaptive throughput slot\|Built adaptive\|graph memory\|Capture cuda graph end" $d/*.log | sed 's/^\[[^]]*\] //' | head -200; done > $BB/switches.txt
grep -h "Capture cuda graph end\|Built adaptive" $BB/*/logs/*.log | tail -12
pack s19a
say end
# ---- .devrun/s19b.sh
# session 19, call B (warm, after A): dense-8 accept 3, adaptive K set (K 2/3/4/6/8) with 0024+0026+0027 captured to
# bs 64, beside fixed K 4 with none of them (the stock-like single-K graphs), one host, bs 1,8,32,64, 2 runs each:
# issue 12's memory target (K set <= 1.5x single K at the same max bs) and the K set's speed with 0019's stale rule.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
ALL3="--variant-env all3:SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 --variant-env all3:SGLANG_TRITON_SHARED_GRAPH_STATE=1 --variant-env all3:SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=1 --variant-env all3:SGLANG_SPEC_CYCLE_STATS=1"
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\"}"
$B --models $M/dense8-acc3 --variant all3=/tmp/site-fork $ALL3 --bs 1,8,32,64 \
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$AD" --name s19-dense8-ks-all3 \
  --budget-s $(left 330) > $L/ks.log 2>&1; say "ks rc=$?"
$B --models $M/dense8-acc3 --variant fixed=/tmp/site-fork --variant-env fixed:SGLANG_SPEC_CYCLE_STATS=1 --bs 1,8,32,64 \
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --name s19-dense8-fixed-k4 --budget-s $(left 570) > $L/fixed.log 2>&1; say "fixed rc=$?"
for d in $BB/*/logs; do echo "== $d"; grep -h "Switch adaptive\|Adaptive throughput slot\|Built adaptive\|Capture cuda graph end" $d/*.log | sed 's/^\[[^]]*\] //' | head -200; done > $BB/switches.txt
grep -h "Capture cuda graph end\|Built adaptive" $BB/*/logs/*.log | tail -12
pack s19b
say end

# session 19 device calls D (fresh nvidia-h200) and E (the same host, warm); slim bundle of commit 6910854 (patches 0001-0027, 0019 with min_samples and the same-tokens visit rule).
# .devrun/common.sh as in ../20261202-1139-h200-tp1-0023-parity-graphs-off/command.sh
# ---- .devrun/s19d.sh
# session 19, call D (fresh; carry .carry .devrun; device_tree.sh hide before, restore after): 0019 with two more rules
# (no visit to a longer chain a measured shorter one matches in tokens; no decision before 3 cycle times of the running
# chain). dense-8 accept 3, bs 1,8,32,64, 2 runs: adaptive K set with 0024+0026+0027, fixed K 4 with none, and the K set
# with 0024 alone (what 0026+0027 change in graph memory and speed, same host).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
ALL3="--variant-env all3:SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 --variant-env all3:SGLANG_TRITON_SHARED_GRAPH_STATE=1 --variant-env all3:SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=1 --variant-env all3:SGLANG_SPEC_CYCLE_STATS=1"
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\"}"
$B --models $M/dense8-acc3 --variant all3=/tmp/site-fork $ALL3 --bs 1,8,32,64 \
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$AD" --name s19-dense8-ks-all3-minsamples \
  --budget-s $(left 300) > $L/ks.log 2>&1; say "ks all3 rc=$?"
$B --models $M/dense8-acc3 --variant fixed=/tmp/site-fork --variant-env fixed:SGLANG_SPEC_CYCLE_STATS=1 --bs 1,8,32,64 \
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --name s19-dense8-fixed-k4-d --budget-s $(left 420) > $L/fixed.log 2>&1; say "fixed rc=$?"
$B --models $M/dense8-acc3 --variant sh24=/tmp/site-fork --variant-env sh24:SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 \
  --variant-env sh24:SGLANG_SPEC_CYCLE_STATS=1 --bs 1,64 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$AD" \
  --name s19-dense8-ks-0024-only --budget-s $(left 575) > $L/sh24.log 2>&1; say "ks 0024 rc=$?"
for d in $BB/*/logs; do echo "== $d"; grep -h "Switch adaptive\|Adaptive throughput slot\|Built adaptive\|Capture cuda graph end" $d/*.log | sed 's/^\[[^]]*\] //' | head -200; done > $BB/switches.txt
grep -h "Built adaptive" $BB/*/logs/*.log | tail -8
pack s19d
say end
# ---- .devrun/s19e.sh
# session 19, call E (last 358 s of the session's device time): call D's K set at bs 64 ran 3.58 ms a cycle with
# 0024+0026+0027 (the first process on the host) against 3.13 ms with 0024 alone (the third). Reverse order, bs 64 only:
# 0024 alone first, then all three.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
export FASTPATH_CALL_LIMIT_S=315
source .devrun/common.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
ALL3="--variant-env all3:SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 --variant-env all3:SGLANG_TRITON_SHARED_GRAPH_STATE=1 --variant-env all3:SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=1 --variant-env all3:SGLANG_SPEC_CYCLE_STATS=1"
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\"}"
$B --models $M/dense8-acc3 --variant sh24=/tmp/site-fork --variant-env sh24:SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 \
  --variant-env sh24:SGLANG_SPEC_CYCLE_STATS=1 $ALL3 --variant all3=/tmp/site-fork --bs 64 --acc-len 0 --e2e-runs 2 \
  --e2e-warmup-len 256 --server-args "$AD" --name s19-dense8-ks-bs64-0024-vs-all3 --budget-s $(left 315) > $L/ab.log 2>&1; say "ab rc=$?"
for d in $BB/*/logs; do echo "== $d"; grep -h "Switch adaptive\|Adaptive throughput slot\|Built adaptive" $d/*.log | sed 's/^\[[^]]*\] //' | head -200; done > $BB/switches.txt
pack s19e
say end

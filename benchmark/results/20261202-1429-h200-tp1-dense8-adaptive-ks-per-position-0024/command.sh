# session 16 device call B, nvidia-h200, fresh host; slim bundle of commit 20edb74 (patches 0001-0024). .devrun/common.sh as in ../20261202-1139-h200-tp1-0023-parity-graphs-off/command.sh
# session 16, call B (warm): 0019's per-position acceptance estimate on GPU (session 15's s15e, which did not fit).
# Adaptive over K = 2/3/4/6/8 (adaptive-ks.json, throughput policy) on dense-8 at accept 3, timed after one
# untimed 256-token call per bs, cycle telemetry on, and patch 0024's shared capture stream on (its graph memory in
# the capture lines against fixed K 4's without it: issue 12's <= 1.5x; its greedy parity in the e2e records);
# then fixed K 4 the same way (0024 off, as stock). Then 0024's real-rejection parity test. Compare with
# benchmark/results/20261202-1206-h200-tp1-dense8-adaptive-ks-graph-hit-and-memory (bs 1: 0.65x, swinging K 6 <-> 8).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\"}"
$B --models $M/dense8-acc3 --variant ks=/tmp/site-fork --variant-env ks:SGLANG_SPEC_CYCLE_STATS=1 \
  --variant-env ks:SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 --bs 1,8,32,64 \
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$AD" --name s16-adaptive-ks-per-position \
  --budget-s $(left 330) > $L/ks.log 2>&1; say "ks rc=$?"
$B --models $M/dense8-acc3 --variant fixed=/tmp/site-fork --variant-env fixed:SGLANG_SPEC_CYCLE_STATS=1 --bs 1,8,32,64 \
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --name s16-fixed-k4 --budget-s $(left 430) > $L/fixed.log 2>&1; say "fixed rc=$?"
for d in $BB/*/logs; do echo "== $d"; grep -h "CUDA graph end\|Built adaptive\|available_gpu_mem" $d/*.log | sed 's/^\[[^]]*\] //' | cut -c1-150; done > $BB/captures.txt
OUT=$BB/gate timeout $(left 580) python3 -m pytest -q -p no:cacheprovider test/gpu/test_parity.py \
  -k "rejected_drafts and shared_capture_stream" > $BB/parity-0024.txt 2>&1; say "parity 0024 rc=$?"; tail -3 $BB/parity-0024.txt
for d in $BB/*/logs; do echo "== $d"; grep -h "Switch adaptive" $d/*.log | sed 's/^\[[^]]*\] //' | sort | uniq -c; done > $BB/switches.txt
cat $BB/switches.txt | head -30
pack s16b
say end

# session 17 device call A, nvidia-h200, fresh host; slim bundle of commit f9a14a8 (patches 0001-0025, 0019 with each candidate's own drafts per cycle).
# .devrun/common.sh as in ../20261202-1139-h200-tp1-0023-parity-graphs-off/command.sh
# session 17, call A (fresh nvidia-h200; carry .carry .devrun; device_tree.sh hide before, restore after):
# 0019 with each candidate's own drafts per cycle + the per-switch "Adaptive throughput slot" log line, on dense-8
# accept 3 (the oracle accepts 1.5 at K 2, 3.0 at K >= 3), K = 2/3/4/6/8, 0024 on; then fixed K 4 (0024 off) in the
# same call. Compare with session 16's 20261202-1429 / -1458 folders (bs 64: 0.96x / 1.02x vs fixed 1.51x).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\"}"
$B --models $M/dense8-acc3 --variant ks=/tmp/site-fork --variant-env ks:SGLANG_SPEC_CYCLE_STATS=1 \
  --variant-env ks:SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 --bs 1,8,32,64 \
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$AD" --name s17-adaptive-ks-own-drafts \
  --budget-s $(left 330) > $L/ks.log 2>&1; say "ks rc=$?"
$B --models $M/dense8-acc3 --variant fixed=/tmp/site-fork --variant-env fixed:SGLANG_SPEC_CYCLE_STATS=1 --bs 1,8,32,64 \
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --name s17-fixed-k4 --budget-s $(left 560) > $L/fixed.log 2>&1; say "fixed rc=$?"
for d in $BB/*/logs; do echo "== $d"; grep -h "Switch adaptive\|Adaptive throughput slot" $d/*.log | sed 's/^\[[^]]*\] //' | head -200; done > $BB/switches.txt
grep -c "Switch adaptive" $BB/*/logs/*.log
pack s17a
say end

# session 15 device calls D (failed at argument parsing: one --variant-env named a variant of the other process) and D2 (this run), nvidia-h200, warm host after call A; slim bundle of commit e888d27. .devrun/common.sh as in ../20261202-1139-h200-tp1-0023-parity-graphs-off/command.sh
# session 15, call D (warm): issue 12 item 1's figures. Adaptive over K = 2/3/4/6/8 at every bs (adaptive-ks.json,
# throughput policy: it measures every K, so the timed runs switch K) with cycle telemetry on: verify_graph_hit per
# bs; and every capture's memory in the logs, against fixed K 4's, for "graph memory of the K set <= 1.5x single K".
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\"}"
CS1="--variant-env ks:SGLANG_SPEC_CYCLE_STATS=1"; CS2="--variant-env fixed:SGLANG_SPEC_CYCLE_STATS=1"
$B --models $M/dense8-acc3 --variant ks=/tmp/site-fork $CS1 --bs 1,8,32,64 --acc-len 0 --e2e-runs 2 --server-args "$AD" \
  --name s15-adaptive-ks --budget-s $(left 330) > $L/ks.log 2>&1; say "ks rc=$?"
$B --models $M/dense8-acc3 --variant fixed=/tmp/site-fork $CS2 --bs 1,8,32,64 --acc-len 0 --e2e-runs 2 \
  --name s15-fixed-k4 --budget-s $(left 570) > $L/fixed.log 2>&1; say "fixed rc=$?"
for d in $BB/*/logs; do echo "== $d"; grep -h "CUDA graph end\|Switch adaptive" $d/*.log | sed 's/^\[[^]]*\] //' | sort | uniq -c | head -40; done > $BB/captures.txt
head -60 $BB/captures.txt
pack s15d
say end

# session 16 device call E, nvidia-h200, fresh host; slim bundle of commit afbc7a8 (patches 0001-0024, 0019 with the median cycle time). .devrun/common.sh as in ../20261202-1139-h200-tp1-0023-parity-graphs-off/command.sh
# session 16, call E (fresh, last 330 s): 0019's median cycle time on GPU. Adaptive over K = 2/3/4/6/8
# (adaptive-ks.json, throughput policy) on dense-8 at accept 3, as s16b's first run (0024 on, telemetry on).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\"}"
$B --models $M/dense8-acc3 --variant ks=/tmp/site-fork --variant-env ks:SGLANG_SPEC_CYCLE_STATS=1 \
  --variant-env ks:SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 --bs 1,8,32,64 \
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$AD" --name s16-adaptive-ks-median \
  --budget-s $(left 290) > $L/ks.log 2>&1; say "ks rc=$?"
for d in $BB/*/logs; do echo "== $d"; grep -h "Switch adaptive" $d/*.log | sed 's/^\[[^]]*\] //' | sort | uniq -c; done > $BB/switches.txt
grep -c "Switch adaptive" $BB/*/logs/*.log
pack s16e
say end

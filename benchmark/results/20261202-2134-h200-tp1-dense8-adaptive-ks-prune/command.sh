# session 18 device calls B, C, D, E and F (F's first try failed on a server arg 0.5.17 does not have and is not kept), nvidia-h200, one warm host after call A; slim bundle of commit 4b00395 (patches 0001-0025).
# .devrun/common.sh as in ../20261202-1139-h200-tp1-0023-parity-graphs-off/command.sh
# ---- .devrun/s18b.sh
# session 18, call B (warm, after call A; carry .carry .devrun; device_tree.sh hide before, restore after):
# 0019 now also skips unmeasured longer chains that cannot win (session 17 lost bs 64s first timed run to steps 5/7 visits).
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
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$AD" --name s18-adaptive-ks-prune \
  --budget-s $(left 330) > $L/ks.log 2>&1; say "ks rc=$?"
$B --models $M/dense8-acc3 --variant fixed=/tmp/site-fork --variant-env fixed:SGLANG_SPEC_CYCLE_STATS=1 --bs 1,8,32,64 \
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --name s18-fixed-k4 --budget-s $(left 560) > $L/fixed.log 2>&1; say "fixed rc=$?"
for d in $BB/*/logs; do echo "== $d"; grep -h "Switch adaptive\|Adaptive throughput slot" $d/*.log | sed 's/^\[[^]]*\] //' | head -200; done > $BB/switches.txt
grep -c "Switch adaptive" $BB/*/logs/*.log
pack s18b
say end
# ---- .devrun/s18c.sh
# session 18, call C (warm, after B): adaptive bs 1/8 ran at 4 ms a cycle whatever K (fixed K4: 2.43 ms). Isolate: 0024 off vs on, bs 1,8.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\"}"
$B --models $M/dense8-acc3 --variant ksoff=/tmp/site-fork --variant-env ksoff:SGLANG_SPEC_CYCLE_STATS=1 --bs 1,8 \
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$AD" --name s18-adaptive-ks-0024off \
  --budget-s $(left 260) > $L/ksoff.log 2>&1; say "ksoff rc=$?"
$B --models $M/dense8-acc3 --variant kson=/tmp/site-fork --variant-env kson:SGLANG_SPEC_CYCLE_STATS=1 \
  --variant-env kson:SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 --bs 1,8 \
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$AD" --name s18-adaptive-ks-0024on \
  --budget-s $(left 520) > $L/kson.log 2>&1; say "kson rc=$?"
for d in $BB/*/logs; do echo "== $d"; grep -h "Switch adaptive\|Adaptive throughput slot" $d/*.log | sed 's/^\[[^]]*\] //' | head -200; done > $BB/switches.txt
pack s18c
say end
# ---- .devrun/s18d.sh
# session 18, call D (warm, after C): adaptive K set, 0024 on, captured up to bs 64: bs 1 cycles took 4 ms (call B) vs 2.27 ms
# when captured only to bs 8 (call C). Sample the scheduler's Python at bs 1 and 64 to see where the 1.7 ms goes.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\"}"
$B --models $M/dense8-acc3 --variant kson=/tmp/site-fork --variant-env kson:SGLANG_SPEC_CYCLE_STATS=1 \
  --variant-env kson:SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 --bs 1,64 --pysample-runs 2 \
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$AD" --name s18-adaptive-ks-pysample \
  --budget-s $(left 540) > $L/ksps.log 2>&1; say "ksps rc=$?"
for d in $BB/*/raw/*-pysample; do [ -d "$d" ] && python3 benchmark/pysample.py "$d" --min-pct 1.0; done > $BB/pysample.txt 2>&1
for d in $BB/*/logs; do echo "== $d"; grep -h "Switch adaptive\|Adaptive throughput slot" $d/*.log | sed 's/^\[[^]]*\] //' | head -200; done > $BB/switches.txt
head -120 $BB/pysample.txt
pack s18d
say end
# ---- .devrun/s18e.sh
# session 18, call E (warm, after D): call B again (bs 1,8,32,64) with sampled stacks, to catch the 4-ms bs-1 state; was:: adaptive K set, 0024 on, captured up to bs 64: bs 1 cycles took 4 ms (call B) vs 2.27 ms
# when captured only to bs 8 (call C). Sample the scheduler's Python at bs 1 and 64 to see where the 1.7 ms goes.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\"}"
$B --models $M/dense8-acc3 --variant kson=/tmp/site-fork --variant-env kson:SGLANG_SPEC_CYCLE_STATS=1 \
  --variant-env kson:SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 --bs 1,8,32,64 --pysample-runs 2 \
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$AD" --name s18-adaptive-ks-pysample-4bs \
  --budget-s $(left 480) > $L/ksps.log 2>&1; say "ksps rc=$?"
for d in $BB/*/raw/*-pysample; do [ -d "$d" ] && python3 benchmark/pysample.py "$d" --min-pct 1.0; done > $BB/pysample.txt 2>&1
for d in $BB/*/logs; do echo "== $d"; grep -h "Switch adaptive\|Adaptive throughput slot" $d/*.log | sed 's/^\[[^]]*\] //' | head -200; done > $BB/switches.txt
head -120 $BB/pysample.txt
pack s18e
say end
# ---- .devrun/s18f.sh
# session 18, call F (warm, after E): call B's adaptive process again without --pysample-runs (B and C's first process ran
# bs 1 at ~4 ms a cycle at every K; D and E, with sampled runs first, at 2.1-2.3 ms). bs 1,8,64.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\"}"
$B --models $M/dense8-acc3 --variant ks=/tmp/site-fork --variant-env ks:SGLANG_SPEC_CYCLE_STATS=1 \
  --variant-env ks:SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 --bs 1,8,64 \
  --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$AD" --name s18-adaptive-ks-nosample \
  --budget-s $(left 300) > $L/ks.log 2>&1; say "ks rc=$?"
for d in $BB/*/logs; do echo "== $d"; grep -h "Switch adaptive\|Adaptive throughput slot" $d/*.log | sed 's/^\[[^]]*\] //' | head -200; done > $BB/switches.txt
pack s18f
say end

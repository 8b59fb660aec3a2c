# session 18 device call A, nvidia-h200, fresh host; slim bundle of commit 4b00395 (patches 0001-0025).
# .devrun/common.sh as in ../20261202-1139-h200-tp1-0023-parity-graphs-off/command.sh
# session 18, call A (fresh, ~560 s): session 17 call D's skipped half (call F ran past the 600-s limit). Patch 0024 on (SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1)
# on kimi16 (MLA target, Marlin MoE) at TP 1, real accept 3, bs 1 and 8: greedy parity against plain decode in the
# same process and graph_memory_gb, beside call D's 0024-off process (another host).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
grep -q "warm-jit rc=0" $L/warmjit.log 2>/dev/null || { python3 -m sglang_fastpath warm-jit > $L/warmjit.log 2>&1; echo "warm-jit rc=$?" >> $L/warmjit.log; say "$(tail -1 $L/warmjit.log)"; }
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
$B --models $M/kimi16-acc3 --variant sh=/tmp/site-fork \
  --variant-env sh:SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 --bs 1,8 --acc-len 0 --e2e-runs 2 \
  --server-args '{"mem_fraction_static": 0.65}' --name s17-kimi16-shared-capture-stream-on \
  --budget-s $(left 575) > $L/k16.log 2>&1; say "k16 rc=$?"
pack s17f
say end

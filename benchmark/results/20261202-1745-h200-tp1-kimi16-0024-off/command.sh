# session 17 device call D, nvidia-h200, warm host (after call C); slim bundle of commit f9a14a8. The sh process was skipped for budget.
# .devrun/common.sh as in ../20261202-1139-h200-tp1-0023-parity-graphs-off/command.sh
# session 17, call D (optional; any host, ~590 s): patch 0024 on the kimi pairs before it can be on by default: kimi16
# (MLA target, Marlin MoE) at TP 1, real accept 3, bs 1 and 8, one process with 0024 off (fork) and one engine pair
# with it on (sh): greedy parity in each, graph_memory_gb of each.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
grep -q "warm-jit rc=0" $L/warmjit.log 2>/dev/null || { python3 -m sglang_fastpath warm-jit > $L/warmjit.log 2>&1; echo "warm-jit rc=$?" >> $L/warmjit.log; say "$(tail -1 $L/warmjit.log)"; }
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
$B --models $M/kimi16-acc3 --variant fork=/tmp/site-fork --variant sh=/tmp/site-fork \
  --variant-env sh:SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 --bs 1,8 --acc-len 0 --e2e-runs 2 \
  --server-args '{"mem_fraction_static": 0.65}' --name s17-kimi16-shared-capture-stream \
  --budget-s $(left 570) > $L/k16.log 2>&1; say "k16 rc=$?"
pack s17d
say end

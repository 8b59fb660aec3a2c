# session 14 device calls B and B2 (nvidia-h200, warm host after call A). B ran the Marlin warm-up and drew the model,
# then had 37 s left; B2 (.devrun/s14b2.sh) ran the benchmark. .devrun/common.sh as in ../20261202-0815-h200-tp1-dense8-accept1.5-adaptive-vs-fixed/command.sh
# session 14, call B (warm after A; warm-jit done there): patch 0023 (draft extend attention on the grouped
# kernel, SGLANG_ENABLE_TRITON_GROUPED_DRAFT_EXTEND) off vs on, kimi16 real accept 3, TP 1, a 4k-token prompt
# (the extend kernel's serial prefix walk grows with context), bs 1 and 8; greedy parity in each process.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
# a fresh host (call A's lost): build Marlin first, else the engines compile it inside their start-up

draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
$B --models $M/kimi16-acc3 --variant fork=/tmp/site-fork --variant dx=/tmp/site-fork \
  --variant-env dx:SGLANG_ENABLE_TRITON_GROUPED_DRAFT_EXTEND=1 --bs 1,8 --acc-len 0 --e2e-runs 2 \
  --prompt-len 4096 --server-args '{"mem_fraction_static": 0.65}' --name s14-kimi16-draft-extend-grouped \
  --budget-s $(left 560) > $L/dx.log 2>&1; say "dx rc=$?"
pack s14b
say end

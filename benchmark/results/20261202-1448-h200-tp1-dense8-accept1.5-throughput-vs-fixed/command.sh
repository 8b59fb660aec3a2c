# session 16 device call C, nvidia-h200, warm host after call D; slim bundle of commit 20edb74 (patches 0001-0024). .devrun/common.sh as in ../20261202-1139-h200-tp1-0023-parity-graphs-off/command.sh
# session 16, call C (warm): issue 12 at accept ~1.5 again, the adaptive slot timed after it has settled
# (--e2e-warmup-len 256: one untimed 256-token call per bs first), against fixed K 4, one process each.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
draw dense8-m65 dense --layers 8 --draft-miss-rate 0.65
S0="--variant-env tput:SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1 --variant-env tput:SGLANG_SPEC_ADAPTIVE_POLICY=throughput"
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-throughput.json\"}"
$B --models $M/dense8-m65 --variant tput=/tmp/site-fork $S0 --bs 1,8,32,64 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 \
  --name s16-tput-settled-m65 --server-args "$AD" --budget-s $(left 400) > $L/tput.log 2>&1; say "tput rc=$?"
$B --models $M/dense8-m65 --variant fixed=/tmp/site-fork --bs 1,8,32,64 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 \
  --name s16-fixed-m65 --budget-s $(left 570) > $L/fixed.log 2>&1; say "fixed rc=$?"
pack s16c
say end

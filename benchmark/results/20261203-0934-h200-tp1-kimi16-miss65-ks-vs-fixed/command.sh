# session 21 device call(s) D (nvidia-h200); slim bundle of commit 6a9d57c (patches 0001-0029), built with --jit-cache build/cache/jit/sm90.
# test/gpu/device_bench.sh (committed) defines B, ALL3, KSET, draw and pack.
# ---- .devrun/s21d.sh
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-miss65 kimi --layers 16 --routed-experts 96 --draft-miss-rate 0.65
K16="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\", \"mem_fraction_static\": 0.65}"
$B --models $M/kimi16-miss65 --variant all3=/tmp/site-fork $ALL3 --bs 1,8 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 \
  --server-args "$K16" --name kimi16-miss65-ks-all3 --budget-s $(left 330) > $L/ks15.log 2>&1; say "ks15 rc=$?"
$B --models $M/kimi16-miss65 --variant fixed=/tmp/site-fork --variant-env fixed:SGLANG_SPEC_CYCLE_STATS=1 --bs 1,8 --acc-len 0 \
  --e2e-runs 2 --e2e-warmup-len 256 --server-args '{"mem_fraction_static": 0.65}' --name kimi16-miss65-fixed-k4 \
  --budget-s $(left 575) > $L/fixed15.log 2>&1; say "fixed15 rc=$?"
pack s21d

# session 21 device call(s) A and C (nvidia-h200); slim bundle of commit 6a9d57c (patches 0001-0029), built with --jit-cache build/cache/jit/sm90.
# test/gpu/device_bench.sh (committed) defines B, ALL3, KSET, draw and pack.
# ---- .devrun/s21a.sh
# session 21, call A (fresh nvidia-h200; carry .carry .devrun; device_tree.sh hide before, restore after).
# The bundle (built with --jit-cache build/cache/jit/sm90) seeds ~/.cache/tvm-ffi at install: warm-jit should say
# "ready in" a few seconds, not ~300 (if ~300: the CPU-built kernel did not load and SGLang rebuilt it). The kimi16
# draw now writes its routed experts as holes (~8 of 45 GB): note its time. Then kimi16 (TP 1, accept 3) with the
# adaptive K set and 0024+0026+0027 (0028/0029 always on), then fixed K 4, bs 1,8.
set -uo pipefail
source test/gpu/device_bench.sh; rm -rf $BB/*
( taskset -c 8-15 python3 -m sglang_fastpath warm-jit > $L/warmjit.log 2>&1; echo "warm-jit rc=$?" >> $L/warmjit.log ) &
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
du -sh $M/kimi16-acc3/target; du -sh --apparent-size $M/kimi16-acc3/target
wait; say "$(tail -3 $L/warmjit.log | tr '\n' ' ')"
K16="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\", \"mem_fraction_static\": 0.65}"
$B --models $M/kimi16-acc3 --variant all3=/tmp/site-fork $ALL3 --bs 1,8 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 \
  --server-args "$K16" --name kimi16-ks-all3 --budget-s $(left 400) > $L/ks.log 2>&1; say "ks rc=$?"
$B --models $M/kimi16-acc3 --variant fixed=/tmp/site-fork --variant-env fixed:SGLANG_SPEC_CYCLE_STATS=1 --bs 1,8 --acc-len 0 \
  --e2e-runs 2 --e2e-warmup-len 256 --server-args '{"mem_fraction_static": 0.65}' --name kimi16-fixed-k4 \
  --budget-s $(left 578) > $L/fixed.log 2>&1; say "fixed rc=$?"
pack s21a
# ---- .devrun/s21c.sh
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
K16="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\", \"mem_fraction_static\": 0.65}"
$B --models $M/kimi16-acc3 --variant all3=/tmp/site-fork $ALL3 --bs 1,8 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 \
  --server-args "$K16" --name kimi16-ks-all3 --budget-s $(left 585) > $L/ks.log 2>&1; say "ks rc=$?"
pack s21c

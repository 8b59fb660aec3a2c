# session 28 device call A (fresh nvidia-h200; slim bundle of commit 2ad7045, patches 0001-0037, sm90 JIT cache): step 1 of test/gpu/queue/s28a.sh as of that commit (its step 2's stock half is in ../20261204-0732-h200-tp1-kimi16-short-fork-vs-stock/raw.tar.gz).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
python3 -m sglang_fastpath warm-jit > $L/warm-jit.log 2>&1; say "$(tail -2 $L/warm-jit.log | head -1)"
python3 benchmark/run.py --profile all --kinds micro --configs tp1 --backends triton --ks 4 --topks 1 --no-plot \
  --out $BB --models $M/kimi16-acc3 --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork \
  --variant gdec=/tmp/site-fork --variant-env gdec:SGLANG_ENABLE_TRITON_GROUPED_DECODE=1 --bs 1,8,32 --ctx 8192 \
  --repeats 1 --iters 20 --server-args '{"mem_fraction_static": 0.65}' --name kimi16-8k-splits-micro \
  --budget-s $(left 330) > $L/a1.log 2>&1
say "micro 8k rc=$?"

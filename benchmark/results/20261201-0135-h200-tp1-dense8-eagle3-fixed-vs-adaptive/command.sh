#!/usr/bin/env bash
# Three device calls on nvidia-h200 (2026-12-01), from the repository root, slim bundle in .carry/bundle.
# 1. adaptive (01:33; part of the call that also soaked; dense-8 drawn with
#    python3 -m sglang_fastpath models dense --layers 8 --device cuda --out $M/dense8):
python3 benchmark/run.py --profile all --kinds e2e --configs tp1 --backends triton --bs 1,8,32,64 --ks 4 --topks 1 \
  --e2e-runs 2 --acc-len 3 --variant fork=/tmp/site-fork --models $M/dense8 --out $OUT/bench \
  --name tp1-dense8-adaptive --no-plot --server-args '{"speculative_adaptive": true}'
# 2. fixed K (01:35, the next call on the warm host): the same without --server-args.
# 3. stock 0.5.17 with adaptive (01:40, fresh host): the Engine arguments of e2e.py
#    (raw.tar.gz: d8raw/adaptive_repro.py; the script lacks a __main__ guard, see README):
PYTHONPATH=/tmp/site-stock:$PWD/python timeout 150 python3 adaptive_repro.py $M/dense8 stock

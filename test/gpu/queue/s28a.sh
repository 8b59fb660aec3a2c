# session 28, call A (fresh nvidia-h200; slim bundle with --jit-cache build/cache/jit/sm90; carry .carry;
# device_tree.sh hide/restore). Issue 18 / the no-speculation baseline:
# 1. patch 0036 (MLA's one latent KV head in the Triton decode split heuristic): decode and verify steps of kimi16 at
#    8k context, stock 0.5.17 vs the fork (0036 on) vs the fork with 0035 (SGLANG_ENABLE_TRITON_GROUPED_DECODE=1),
#    bs 1 / 8 / 32, K 4, CUDA graphs (benchmark micro kind; floors in results.json). Expected from the code reading:
#    stock decode ~74 / 430 us a layer of attention at bs 1 / 8, the fork near the kernel bench's 65 / 187.
# 2. patch 0035 end to end at 128-token prompts, bs 1/8/32/64, fork vs gdec, plain decode and EAGLE-3 in each process,
#    greedy parity (session 27 measured it at 8k only, before 0036 existed).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
python3 -m sglang_fastpath warm-jit > $L/warm-jit.log 2>&1; say "$(tail -2 $L/warm-jit.log | head -1)"
python3 benchmark/run.py --profile all --kinds micro --configs tp1 --backends triton --ks 4 --topks 1 --no-plot \
  --out $BB --models $M/kimi16-acc3 --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork \
  --variant gdec=/tmp/site-fork --variant-env gdec:SGLANG_ENABLE_TRITON_GROUPED_DECODE=1 --bs 1,8,32 --ctx 8192 \
  --iters 20 --server-args '{"mem_fraction_static": 0.65}' --name kimi16-8k-splits-micro \
  --budget-s $(left 330) > $L/a1.log 2>&1
say "micro 8k rc=$?"
CAP="{\"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64}"
$B --models $M/kimi16-acc3 --variant fork=/tmp/site-fork --variant gdec=/tmp/site-fork \
  --variant-env gdec:SGLANG_ENABLE_TRITON_GROUPED_DECODE=1 --bs 1,8,32,64 --acc-len 0 --e2e-runs 2 \
  --server-args "$CAP" --name kimi16-short-gdec --budget-s $(left 575) > $L/a2.log 2>&1
say "gdec short rc=$?"
grep -h "decode attention: grouped" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head
pack s28a

# session 28, call A (fresh nvidia-h200; slim bundle with --jit-cache build/cache/jit/sm90; carry .carry;
# device_tree.sh hide/restore). Patch 0036 (MLA's one latent KV head in the Triton decode split heuristic, default on)
# against stock 0.5.17, before anything else: it changes every MLA decode's split count.
# 1. Decode and verify steps of kimi16 at 8k context: stock vs fork (0036 on) vs fork + 0035
#    (SGLANG_ENABLE_TRITON_GROUPED_DECODE=1), bs 1 / 8 / 32, K 4, CUDA graphs (micro kind; floors in results.json).
#    Expected from the code reading: stock's decode attention ~74 / 430 us a layer at bs 1 / 8, the fork's near the
#    kernel bench's 65 / 187.
# 2. End to end at 128-token prompts (short context: 0036 gives more, smaller splits there), stock vs fork, plain decode
#    and EAGLE-3 (real accept 3, K 4) in each process, bs 1 / 8 / 32 / 64, greedy parity: "no fork figure below stock
#    without speculation" with 0036 in.
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
CAP="{\"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64}"
python3 benchmark/run.py --profile all --kinds e2e --configs tp1 --backends triton --ks 4 --topks 1 --no-plot --out $BB \
  --models $M/kimi16-acc3 --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork --bs 1,8,32,64 --acc-len 0 \
  --e2e-runs 2 --server-args "$CAP" --name kimi16-short-stock-vs-fork --budget-s $(left 575) > $L/a2.log 2>&1
say "short stock vs fork rc=$?"
grep -h "decode attention: grouped" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head
pack s28a

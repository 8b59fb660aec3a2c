# session 29 device call A (fresh nvidia-h200; slim bundle of commit b22eeab, patches 0001-0038, sm90 JIT cache): test/gpu/queue/s29a.sh as of that commit.
# session 29, call A (fresh nvidia-h200; slim bundle with --jit-cache build/cache/jit/sm90; carry .carry;
# device_tree.sh hide/restore). Issue 18: patch 0036 (MLA's one latent KV head in the Triton decode split heuristic,
# default on) against stock 0.5.17 at 8k context, where it matters. Session 28's try of this run
# (benchmark/results/20261204-0710-h200-tp1-kimi16-8k-splits-micro-incomplete/) lost stock to a 120-s job timeout and the
# fork's bs 32 to a one-extend cuBLAS failure; the harness now prefills in 32k-token groups and sizes timeouts by the
# weights and prefill tokens. Decode and verify (K 4) steps of kimi16 at 8192 tokens, bs 1 / 8 / 32, CUDA graphs,
# stock vs fork (0036 on) vs fork + 0035 (SGLANG_ENABLE_TRITON_GROUPED_DECODE=1), one round each. Expected from the code
# reading: stock's decode ~74 / 430 us a layer at bs 1 / 8; the fork near the kernel bench's 65 / 187.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
python3 -m sglang_fastpath warm-jit > $L/warm-jit.log 2>&1; say "$(tail -2 $L/warm-jit.log | head -1)"
python3 benchmark/run.py --profile all --kinds micro --configs tp1 --backends triton --ks 4 --topks 1 --no-plot \
  --out $BB --models $M/kimi16-acc3 --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork \
  --variant gdec=/tmp/site-fork --variant-env gdec:SGLANG_ENABLE_TRITON_GROUPED_DECODE=1 --bs 1,8,32 --ctx 8192 \
  --repeats 1 --iters 20 --server-args '{"mem_fraction_static": 0.65}' --name kimi16-8k-splits-micro \
  --budget-s $(left 575) > $L/a1.log 2>&1
say "micro 8k rc=$?"
grep -h "FAILED\|timeout\|decode attention: grouped" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | cut -c1-160 | sort | uniq -c | head
pack s29a

# session 25 device call A (nvidia-h200, fresh host); slim bundle with the sm90 JIT cache of commit 5b5480f (patches 0001-0034), built by: .venv/bin/sglang-fastpath bundle --out .carry/bundle --profile slim --jit-cache build/cache/jit/sm90; carry .carry .devrun; test/gpu/device_tree.sh hide/restore around the call (it then hid all of patches/upstream, so the GPU test's collection failed: test/sglang_trees.py reads the port's series file at import; device_tree.sh keeps that file since)
# session 25, call A (fresh nvidia-h200; bundle built with --jit-cache build/cache/jit/sm90 from a commit with patch 0032;
# carry .carry .devrun; device_tree.sh hide/restore). Issue 18: patch 0032 on a GPU for the first time as SGLang's module
# (GPU test: 9 cases x fp16/bf16, default tile eager + CUDA graph), then kimi16 end to end at --page-size 64, real accept 3,
# 8k prompts, bs 1 and 8: EAGLE-3 with SGLANG_ENABLE_TRITON_TMA_VERIFY=1 (variant tma) against the same without it (base),
# greedy parity in each, one process per variant.
set -uo pipefail
source test/gpu/device_bench.sh; rm -rf $BB/*
timeout 110 python3 -m pytest -q -m gpu test/test_verify_attention_tma.py > $L/tma-gpu-test.log 2>&1
say "tma gpu test rc=$?"; tail -4 $L/tma-gpu-test.log
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
P64="{\"page_size\": 64, \"mem_fraction_static\": 0.65}"
python3 benchmark/run.py --profile all --kinds e2e --configs tp1 --backends triton --ks 4 --topks 1 --no-plot --out $BB \
  --models $M/kimi16-acc3 --variant base=/tmp/site-fork --variant tma=/tmp/site-fork \
  --variant-env tma:SGLANG_ENABLE_TRITON_TMA_VERIFY=1 --bs 1,8 --prompt-len 8192 --output-len 128 --acc-len 0 \
  --e2e-runs 2 --server-args "$P64" --name kimi16-p64-tma-vs-grouped --budget-s $(left 520) > $L/a1.log 2>&1
say "tma e2e rc=$?"
grep -h "MLA KV tiles\|TMA tiles not used" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head
pack s25a

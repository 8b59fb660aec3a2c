# session 23 device call A (nvidia-h200, one host: A fresh, C and B warm, in that order); slim bundle of commit a816fb5 (patches 0001-0031), built with --jit-cache build/cache/jit/sm90.
# test/gpu/device_bench.sh (committed) defines B, ALL3, BF16, KSET, KOFF, SKIP0, draw and pack.
# ---- .devrun/s23a.sh
# session 23, call A (fresh nvidia-h200; bundle rebuilt with --jit-cache build/cache/jit/sm90 from this commit; carry
# .carry .devrun; device_tree.sh hide before, restore after). The first kimi process on a fresh host compiles its
# Triton kernels (~110 s more start-up). kimi16 with the draft wrong 65% (accept ~1.4): the K set plus steps 0
# (adaptive-ks-off.json = package data ks-off.json) with all3 + 0030, 0031 in the build (no cycle timed across a
# prefill), graphs to bs 64: issue 12's ">= no speculation at every bs in 1..64" at accept 1.5, bs 1, 8, 32, 64.
set -uo pipefail
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-miss65 kimi --layers 16 --routed-experts 96 --draft-miss-rate 0.65
K16OFF="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-off.json\", \"mem_fraction_static\": 0.65}"
$B --models $M/kimi16-miss65 --variant all3=/tmp/site-fork $ALL3 $BF16 --bs 1,8,32,64 --acc-len 0 --e2e-runs 2 \
  --e2e-warmup-len 256 --server-args "$K16OFF" --name kimi16-miss65-koff-bs64 --budget-s $(left 575) > $L/a1.log 2>&1
say "koff rc=$?"
pack s23a
# benchmark/run.py as invoked
cd .
python3 benchmark/run.py --profile all --kinds e2e --configs tp1 --backends triton --ks 4 --topks 1 --no-plot --out /tmp/bench --models /tmp/fastpath-models/kimi16-miss65 --variant all3=/tmp/site-fork --variant-env all3:SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 --variant-env all3:SGLANG_TRITON_SHARED_GRAPH_STATE=1 --variant-env all3:SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=1 --variant-env all3:SGLANG_SPEC_CYCLE_STATS=1 --variant-env all3:SGLANG_CUDA_GRAPH_BF16_VERIFY_LOGITS=1 --bs 1,8,32,64 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args '{"speculative_adaptive": true, "speculative_adaptive_config": "benchmark/configs/adaptive-ks-off.json", "mem_fraction_static": 0.65}' --name kimi16-miss65-koff-bs64 --budget-s 490

# the processes it started: environment changes, then the command (run in a scratch folder)
# e2e-all3-tp1-triton: ok in 416 s
env CUDA_VISIBLE_DEVICES=0 HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=python:/tmp/site-fork:. PYTHONUNBUFFERED=1 SGLANG_CUDA_GRAPH_BF16_VERIFY_LOGITS=1 SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=1 SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1 SGLANG_SPEC_CYCLE_STATS=1 SGLANG_TRITON_SHARED_GRAPH_STATE=1 TOKENIZERS_PARALLELISM=false TORCH_SYMM_MEM_DISABLE_MULTICAST=1 TQDM_DISABLE=1 TRANSFORMERS_OFFLINE=1 python3 -m benchmark.worker --spec /tmp/bench/20261203-1438-h200-kimi16-miss65-koff-bs64/raw/e2e-all3-tp1-triton.spec.json --out /tmp/bench/20261203-1438-h200-kimi16-miss65-koff-bs64/raw/e2e-all3-tp1-triton.jsonl

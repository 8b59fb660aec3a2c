#!/usr/bin/env bash
# nvidia-h200-x2, from the repository root with the slim bundle at .carry/bundle (as the README says):
NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 SGLANG_CUDA_COREDUMP_BEFORE_CRASH_WAIT_SECS=0 \
  PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0 timeout -k 10 220 bash demo.sh --bundle .carry/bundle --timeout 170 \
  --log $OUT/demo_server.log

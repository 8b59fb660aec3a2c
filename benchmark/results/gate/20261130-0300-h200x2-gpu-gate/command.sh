# Call A on nvidia-h200-x2: correctness (demo, parity TP1 on two GPUs in parallel, all-reduce TP2).
R=test/gpu/run_on_device.sh
bash $R --preflight > $OUT/preflight.log 2>&1 || { tail -20 $OUT/preflight.log; exit 3; }
export PYTHONPATH=/tmp/site-fork:$PWD/python PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false \
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 SGLANG_IS_FLASHINFER_AVAILABLE=false \
  SGLANG_CUDA_COREDUMP_BEFORE_CRASH_WAIT_SECS=0 SGLANG_FASTPATH_MODELS=/tmp/m
mkdir -p /tmp/m /tmp/e0 /tmp/e1 /tmp/e2
T0=$(date +%s)
( export CUDA_VISIBLE_DEVICES=0 OUT=/tmp/e0
  timeout 150 python3 -m sglang_fastpath demo --models /tmp/m/tiny --log /tmp/e0/demo_server.log --timeout 140 > /tmp/e0/demo.txt 2>&1
  timeout 300 python3 -m pytest -q -rA test/gpu/test_parity.py -k "tiny_models-1 or oracle" > /tmp/e0/pytest.txt 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=1 OUT=/tmp/e1
  timeout 450 python3 -m pytest -q -rA test/gpu/test_parity.py -k "dense_models-1" > /tmp/e1/pytest.txt 2>&1 ) &
wait
echo "parallel phase $(( $(date +%s) - T0 ))s"
OUT=/tmp/e2 timeout $(( 560 - $(date +%s) + T0 )) python3 -m pytest -q -rA test/gpu/test_verify_allreduce.py > /tmp/e2/pytest.txt 2>&1
echo "tp2 phase done $(( $(date +%s) - T0 ))s"
cat /tmp/e0/demo.txt | tail -5
for f in /tmp/e0/pytest.txt /tmp/e1/pytest.txt /tmp/e2/pytest.txt; do echo "== $f"; grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed|^E  " $f | head -20; done
tar czf $OUT/engines.tgz /tmp/e0 /tmp/e1 /tmp/e2 2>/dev/null; ls -la $OUT

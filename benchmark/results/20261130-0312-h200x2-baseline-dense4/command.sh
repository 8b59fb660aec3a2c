# Call B on nvidia-h200-x2: README demo on GPU 0 while the stock-vs-fork baseline runs on dense-4.
R=test/gpu/run_on_device.sh
bash $R --preflight > $OUT/preflight.log 2>&1 || { tail -20 $OUT/preflight.log; exit 3; }
export PYTHONPATH=/tmp/site-fork:$PWD/python PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false \
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 SGLANG_IS_FLASHINFER_AVAILABLE=false \
  SGLANG_CUDA_COREDUMP_BEFORE_CRASH_WAIT_SECS=0
T0=$(date +%s)
( CUDA_VISIBLE_DEVICES=0 timeout 170 python3 -m sglang_fastpath demo --models /tmp/m/tiny --log $OUT/demo_server.log --timeout 160 > $OUT/demo.txt 2>&1 ) &
CUDA_VISIBLE_DEVICES=1 timeout 60 python3 -m sglang_fastpath models dense --layers 4 --device cuda --out /tmp/m/dense4 > $OUT/models.txt 2>&1
echo "models $(( $(date +%s) - T0 ))s"; tail -2 $OUT/models.txt
wait
echo "demo $(( $(date +%s) - T0 ))s"; tail -4 $OUT/demo.txt
timeout $(( 390 - $(date +%s) + T0 )) python3 benchmark/run.py --models /tmp/m/dense4 --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork \
  --out $OUT/bench --name baseline-dense4 --kinds micro --configs tp1,tp2-pcie --backends triton --bs 1,8,32,64 --ks 4 --topks 1 --iters 10 --eager \
  --budget-s $(( 380 - $(date +%s) + T0 )) --no-plot 2>&1 | tail -25
cd $OUT/bench && tar czf ../bench.tgz . ; ls -la $OUT

# session 28 device call D (nvidia-h200, warm after call C: kimi16-acc3 drawn; slim bundle of commit 2ad7045, patches 0001-0037, sm90 JIT cache). The stock-only repeat in raw.tar.gz (call-a-stock-repeat/) is step 2 of test/gpu/queue/s28a.sh as of 2ad7045 (call A, fresh host), whose fork half the budget cut.
export FASTPATH_PREFLIGHT_DONE=1; source test/gpu/device_bench.sh; rm -rf $BB/*
python3 benchmark/run.py --profile all --kinds e2e --configs tp1 --backends triton --ks 4 --topks 1 --no-plot --out $BB \
  --models $M/kimi16-acc3 --variant fork=/tmp/site-fork --variant stock=/tmp/site-stock --bs 1,8,32,64 --acc-len 0 \
  --e2e-runs 2 --server-args '{"mem_fraction_static": 0.65, "cuda_graph_max_bs_decode": 64}' \
  --name kimi16-short-fork-vs-stock --budget-s 470 > $L/a3.log 2>&1
say "rc=$?"; pack s28a2

# session 27 device call B (nvidia-h200, warm after call A: kimi16-acc3 drawn, Marlin from the JIT cache); the same bundle (patches 0001-0036; 0035 is unchanged since).
# session 27, call B (warm after A). Issue 18: patch 0035's GPU tests (now with the 64-head decode tile), then plain
# decode through 0035 end to end on kimi16 (64 heads at TP 1: the new tile, any bs) at 8k prompts, bs 1 / 8 / 32:
# variant gdec (SGLANG_ENABLE_TRITON_GROUPED_DECODE=1) against base, no speculation and EAGLE-3 (real accept 3) in each
# process, greedy parity. Expected from the kernel figures: ~36 us a layer saved at bs 1 8k (65 -> 29), 16 layers.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
timeout 140 python3 -m pytest -q -m gpu test/test_grouped_decode.py -p no:cacheprovider > $L/gdec-gpu-test.log 2>&1
say "0035 gpu test rc=$?"; tail -3 $L/gdec-gpu-test.log
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
CAP="{\"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 32}"
$B --models $M/kimi16-acc3 --variant base=/tmp/site-fork --variant gdec=/tmp/site-fork \
  --variant-env gdec:SGLANG_ENABLE_TRITON_GROUPED_DECODE=1 --bs 1,8,32 --prompt-len 8192 --output-len 128 --acc-len 0 \
  --e2e-runs 2 --server-args "$CAP" --name kimi16-8k-gdec --budget-s $(left 570) > $L/b1.log 2>&1
say "gdec e2e rc=$?"
grep -h "decode attention: grouped" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head
pack s27b

#!/usr/bin/env bash
# Device call 1 (nvidia-h200, fresh host): SGLang's INT4 MoE kernel tuned at Kimi TP=2 shapes, then
# fastpath / triton-default / triton-tuned / marlin per MoE layer at M 1..64 (one GPU).
set -uo pipefail
source test/gpu/device_env.sh
W=$OUT/work; mkdir -p $W
C=${TVM_FFI_CACHE_DIR:-$HOME/.cache/tvm-ffi}; mkdir -p $C; tar -C $C -xzf .carry/tvm-ffi-cache.tgz
export PYTHONPATH=$PWD/sgl-kernel:$PYTHONPATH
nproc > $W/host.txt; nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv >> $W/host.txt
python3 -c "import triton, torch, sglang; print('triton', triton.__version__, 'torch', torch.__version__, 'sglang', sglang.__version__)" >> $W/host.txt 2>&1
say "preflight done"
( python3 -m fastpath_kernels.moe.sglang_baselines warm marlin > $W/warm-marlin.log 2>&1;
  python3 -m fastpath_kernels.moe.sglang_baselines warm triton > $W/warm-triton.log 2>&1 ) &
TB=$(( $(left 330) ))
say "tuning tp2 for ${TB}s"
timeout -k 5 $(( TB + 20 )) python3 -m moe_tuning tune --tp 2 --device h200 --out $W/tune-tp2 --ms 1,2,4,8,16,32,64 \
  --compile-workers 13 --budget-s $TB > $W/tune.log 2>&1
say "tune rc=$?"; tail -12 $W/tune.log | tr '\r' '\n' | tail -12
wait
D=$(( $(left 575) )); say "bench for ${D}s"
timeout -k 5 $(( D + 10 )) python3 -m fastpath_kernels.moe.bench --out $W/bench --tp 2 \
  --variants fastpath,triton-default,triton-tuned,marlin --tuned-configs $W/tune-tp2 --deadline-s $D > $W/bench.log 2>&1
say "bench rc=$?"
cp $W/tune-tp2/tune-log.jsonl $OUT/ 2>/dev/null; cp $W/bench/moe_small_m.json $OUT/ 2>/dev/null
tar -C $OUT -czf $OUT/call1-logs.tgz work preflight.log 2>/dev/null; rm -rf $W $OUT/preflight.log
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/moe_small_m.json"))
for e in d["errors"][-8:]: print("ERR", e[:300])
for n in d["notes"]: print("NOTE", n)
for r in sorted(d["records"], key=lambda r: (r["M"], r["variant"])):
    print(f"M={r['M']:>3} {r['variant']:<15} {r['value']:8.1f} us  floor {r['floor_us']:6.1f}")
PY

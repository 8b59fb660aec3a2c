#!/usr/bin/env bash
# Device call A on nvidia-h200 (2026-12-01 session 10, fresh host), from the repository root, slim bundle in
# .carry/bundle (patches 0001-0020 as landed in f597e0a), the scripts carried as .devrun/. .devrun/common.sh:
#   # sourced by the s10* device scripts (session 10), from the repository root
#   source test/gpu/device_env.sh
#   BB=.; L=/tmp/logs; mkdir -p $BB $L
#   B="python3 benchmark/run.py --profile all --kinds e2e --configs tp1 --backends triton --ks 4 --topks 1 --no-plot --out $BB"
#   draw() {  # NAME ARGS...: draw a model pair into $M/NAME unless it is there
#     local n=$1; shift
#     [ -f $M/$n/target/config.json ] || python3 -m sglang_fastpath models "$@" --device cuda --out $M/$n > $L/draw-$n.log 2>&1
#     say "drawn $n: $(tail -1 $L/draw-$n.log 2>/dev/null | cut -c1-100)"
#   }
#   summ() {  # print every results.json record under $BB, one line each
#     for f in $BB/*/results.json; do echo "== $f"; python3 - "$f" <<'PY'
#   import json, sys
#   r = json.load(open(sys.argv[1]))
#   for x in r["records"]:
#       print(x["variant"], x["mode"], "bs", x["bs"], x["metric"], round(x["value"], 2), [round(v, 1) for v in x.get("rounds") or []])
#   for e in r.get("errors") or []:
#       print("ERROR", str(e)[:300])
#   PY
#     done
#   }
#   pack() {  # NAME: the benchmark folders and logs into $OUT/NAME.tgz (8 files come back at most)
#     summ > $OUT/$1-summary.txt 2>&1; cp -r $L $BB/ 2>/dev/null; tar czf $OUT/$1.tgz -C $BB . 2>/dev/null; cat $OUT/$1-summary.txt
#   }
# ---- .devrun/s10a.sh
# call A (fresh nvidia-h200): install; Marlin warm-jit on cores 8-15 in the background; dense-8 diagnostics of
# the fork as it stands (0001-0020 defaults): e2e acc 3 bs 1/8/32/64 with the scheduler sampler and 12 profiled
# steps; then draw kimi4 (for call B) and bring the Marlin JIT cache back.
set -uo pipefail
source .devrun/common.sh
( taskset -c 8-15 python3 -m sglang_fastpath warm-jit > $L/warmjit.log 2>&1; echo "warm-jit rc=$?" >> $L/warmjit.log ) &
WJ=$!
draw dense8 dense --layers 8
$B --models $M/dense8 --variant fork=/tmp/site-fork --bs 1,8,32,64 --acc-len 3 --e2e-runs 3 --pysample-runs 1 --profile-steps 12 \
  --name s10-fork-diag --budget-s $(left 420) > $L/diag.log 2>&1; say "diag rc=$?"
for d in $BB/*/raw/*-pysample; do [ -d "$d" ] && python3 benchmark/pysample.py "$d" --min-pct 1.5; done > $OUT/pysample.txt 2>&1
T=$(ls -d $BB/*/raw 2>/dev/null | head -1)
python3 benchmark/cycle_phases.py $(ls -d $T/e2e_*bs* 2>/dev/null | grep -v pysample) --launches 10 --accept-len 3 --json $OUT/cycle-phases.json > $OUT/cycle-phases.txt 2>&1; say "phases rc=$?"
wait $WJ; tail -2 $L/warmjit.log
C=${TVM_FFI_CACHE_DIR:-$HOME/.cache/tvm-ffi}; tar -C "$C" -czf $OUT/tvm-ffi-cache.tgz . && ls -la $OUT/tvm-ffi-cache.tgz
pack s10a
head -12 $OUT/cycle-phases.txt
draw kimi4 kimi --layers 4
say end
# here, from the traces in raw.tar.gz ($T = its raw/e2e-fork-tp1-triton-traces):
# python3 benchmark/cycle_phases.py $T/e2e_nospec-bs1 $T/e2e_spec-bs1 $T/e2e_nospec-bs8 $T/e2e_spec-bs8 $T/e2e_nospec-bs32 $T/e2e_spec-bs32 $T/e2e_nospec-bs64 $T/e2e_spec-bs64 --launches 12 --accept-len 3.01 --slow-calls --json cycle-phases.json --png timeline.png

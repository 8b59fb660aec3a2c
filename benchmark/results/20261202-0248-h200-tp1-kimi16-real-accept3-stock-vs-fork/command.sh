#!/usr/bin/env bash
# Device calls of 2026-12-02 session 12 on nvidia-h200 (one host kept warm, slim bundle with patches 0001-0022 of commit 1c02133), from the repository root, the scripts carried as .devrun/ (call A drew kimi16-acc3 and built the Marlin JIT cache; calls B and D measured; here: cycle-phases.txt/json and timeline.png remade from call D's traces with python3 benchmark/cycle_phases.py raw-call-d/e2e-fork-tp1-triton-traces/e2e_{nospec,spec}-bs{1,8} --launches 12 --accept-len 2.98 --slow-calls --graphs --json cycle-phases.json; the PNG without --graphs, same traces)
# ---- .devrun/common.sh
#   # sourced by the s12* device scripts (session 12), from the repository root
#   source test/gpu/device_env.sh
#   export PYTHONPATH=$PWD/python:$PYTHONPATH  # this tree's sglang_fastpath before the bundle's
#   BB=/tmp/bench; L=/tmp/logs; mkdir -p $BB $L
#   B="python3 benchmark/run.py --profile all --kinds e2e --configs tp1 --backends triton --ks 4 --topks 1 --no-plot --out $BB"
#   FS="--variant-env stash:SGLANG_ENABLE_FUSED_SPEC_STASH=1"
#   draw() {  # NAME ARGS...: draw a model pair into $M/NAME unless it is there
#     local n=$1; shift
#     [ -f $M/$n/target/config.json ] || python3 -m sglang_fastpath models "$@" --device cuda --out $M/$n > $L/draw-$n.log 2>&1
#     say "drawn $n: $(tail -2 $L/draw-$n.log 2>/dev/null | head -1 | cut -c1-160)"
#   }
#   summ() {  # print every results.json record under $BB, one line each
#     for f in $BB/*/results.json; do echo "== $f"; python3 - "$f" <<'PY'
#   import json, sys
#   r = json.load(open(sys.argv[1]))
#   for x in r["records"]:
#       e = x.get("extra") or {}
#       print(x["variant"], x["mode"], "bs", x["bs"], x["metric"], round(x["value"], 2), [round(v, 1) for v in x.get("rounds") or []],
#             {k: e[k] for k in ("accept_length", "greedy_parity", "spec_accept_length") if k in e})
#   for e in r.get("errors") or []:
#       print("ERROR", str(e)[:300])
#   PY
#     done
#   }
#   pack() {  # NAME: the benchmark folders and logs into $OUT/NAME.tgz (8 files come back at most)
#     summ > $OUT/$1-summary.txt 2>&1; cp -r $L $BB/ 2>/dev/null; tar czf $OUT/$1.tgz -C $BB . 2>/dev/null; cat $OUT/$1-summary.txt
#   }
# ---- .devrun/s12a.sh
# call A (fresh nvidia-h200): install; Marlin warm-jit on cores 8-15 in the background; draw the tiny pair with 30%
# misses, dense-8 with a periodic miss (real accept 3) and kimi16 (real accept 3); 1) the real-rejection gate's
# fused_stash variant (0022 on); 2) 0022 off/on at real accept 3 on dense-8, bs 1/8/32, alternating processes.
set -uo pipefail
source .devrun/common.sh
say "start"
( taskset -c 8-15 python3 -m sglang_fastpath warm-jit > $L/warmjit.log 2>&1; echo "warm-jit rc=$?" >> $L/warmjit.log ) &
WJ=$!
python3 -m sglang_fastpath models tiny --draft-miss-rate 0.3 --out $M/tiny-misses > $L/draw-tiny-misses.log 2>&1
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
OUT=$OUT timeout 200 python3 -m pytest -x -q -p no:cacheprovider test/gpu/test_parity.py -k "rejected_drafts and fused_stash" > $L/gate-fs.log 2>&1
say "gate fused_stash rc=$?"; tail -5 $L/gate-fs.log
mkdir -p $L/engines; cp -r $OUT/engines/. $L/engines/ 2>/dev/null; rm -rf $OUT/engines
$B --models $M/dense8-acc3 --variant fork=/tmp/site-fork --variant stash=/tmp/site-fork $FS --bs 1,8,32 --acc-len 0 \
  --e2e-runs 5 --name s12-fused-stash-r1 --budget-s $(left 540) > $L/fs-r1.log 2>&1; say "fs rc=$?"
wait $WJ; tail -2 $L/warmjit.log
pack s12a
say end
# ---- .devrun/s12b.sh
# call B (warm after A: sites installed, Marlin cached, kimi16-acc3 drawn): kimi16 at TP 1, real accept 3,
# stock 0.5.17 vs the fork, bs 1/8, e2e-runs 3 (greedy parity checked per process).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
$B --models $M/kimi16-acc3 --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork --bs 1,8 --acc-len 0 \
  --e2e-runs 3 --server-args '{"mem_fraction_static": 0.65}' --name s12-kimi16-tp1-real3-stock-vs-fork \
  --budget-s $(left 575) > $L/k16.log 2>&1; say "k16 rc=$?"
pack s12b
say end
# ---- .devrun/s12d.sh
# call D (warm after C): kimi16 at TP 1, real accept 3, the fork alone, bs 1/8, 3 timed runs, then 12 profiled
# steps per point (the GPU-bound ratio of the cycle) and the phase table.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
$B --models $M/kimi16-acc3 --variant fork=/tmp/site-fork --bs 1,8 --acc-len 0 --e2e-runs 3 --profile-steps 12 \
  --server-args '{"mem_fraction_static": 0.65}' --name s12-kimi16-tp1-real3-fork-profile \
  --budget-s $(left 420) > $L/k16p.log 2>&1; say "k16 profile rc=$?"
T=$(ls -d $BB/*/raw/*traces 2>/dev/null | head -1)
python3 benchmark/cycle_phases.py $(ls -d $T/e2e_*bs* 2>/dev/null) --launches 12 --accept-len 2.98 --json $OUT/cycle-phases.json > $OUT/cycle-phases.txt 2>&1; say "phases rc=$?"
head -30 $OUT/cycle-phases.txt
pack s12d
say end

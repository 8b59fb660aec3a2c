# session 13 device calls A and A2 (nvidia-h200, one host kept warm); .devrun/common.sh defines B, draw, left, say, pack
# --- common.sh
# sourced by the s12* device scripts (session 12), from the repository root
source test/gpu/device_env.sh
export PYTHONPATH=$PWD/python:$PYTHONPATH  # this tree's sglang_fastpath before the bundle's
BB=/tmp/bench; L=/tmp/logs; mkdir -p $BB $L
B="python3 benchmark/run.py --profile all --kinds e2e --configs tp1 --backends triton --ks 4 --topks 1 --no-plot --out $BB"
FS="--variant-env stash:SGLANG_ENABLE_FUSED_SPEC_STASH=1"
draw() {  # NAME ARGS...: draw a model pair into $M/NAME unless it is there
  local n=$1; shift
  [ -f $M/$n/target/config.json ] || python3 -m sglang_fastpath models "$@" --device cuda --out $M/$n > $L/draw-$n.log 2>&1
  say "drawn $n: $(tail -2 $L/draw-$n.log 2>/dev/null | head -1 | cut -c1-160)"
}
summ() {  # print every results.json record under $BB, one line each
  for f in $BB/*/results.json; do echo "== $f"; python3 - "$f" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for x in r["records"]:
    e = x.get("extra") or {}
    print(x["variant"], x["mode"], "bs", x["bs"], x["metric"], round(x["value"], 2), [round(v, 1) for v in x.get("rounds") or []],
          {k: e[k] for k in ("accept_length", "greedy_parity", "spec_accept_length") if k in e})
for e in r.get("errors") or []:
    print("ERROR", str(e)[:300])
PY
  done
}
pack() {  # NAME: the benchmark folders and logs into $OUT/NAME.tgz (8 files come back at most)
  summ > $OUT/$1-summary.txt 2>&1; cp -r $L $BB/ 2>/dev/null; tar czf $OUT/$1.tgz -C $BB . 2>/dev/null; cat $OUT/$1-summary.txt
}
# --- call A: .devrun/s13a.sh (its kimi4 step was killed by the call's budget: warm-jit took the first ~400 s)
# session 13, call A (fresh nvidia-h200; carry .carry .devrun; device_tree.sh hide before, restore after):
# install; Marlin warm-jit on cores 8-15 in the background; 1) graph_launch_cost (which condition makes a
# graph launch slow / starve the GPU); 2) draw kimi4 with real accept 3 (host-bound kimi) and dense8-acc3;
# 3) kimi4 at TP 1, stock vs fork, real accept 3, bs 1/8, 12 profiled steps (cycle_phases --graphs).
set -uo pipefail
source .devrun/common.sh
say "start"
( taskset -c 8-15 python3 -m sglang_fastpath warm-jit > $L/warmjit.log 2>&1; echo "warm-jit rc=$?" >> $L/warmjit.log ) &
WJ=$!
timeout 120 python3 benchmark/graph_launch_cost.py --kernels 64,256,512,1024 --iters 100 --out $OUT/graph-launch.json > $OUT/graph-launch.txt 2>&1
say "graph_launch_cost rc=$?"; cat $OUT/graph-launch.txt
draw kimi4-acc3 kimi --layers 4 --draft-accept-length 3
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
wait $WJ; tail -2 $L/warmjit.log
$B --models $M/kimi4-acc3 --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork --bs 1,8 --acc-len 0 \
  --e2e-runs 3 --profile-steps 12 --server-args '{"mem_fraction_static": 0.65}' --name s13-kimi4-tp1-real3 \
  --budget-s $(left 560) > $L/k4.log 2>&1; say "kimi4 rc=$?"
T=$(ls -d $BB/*/raw/e2e-fork-*traces 2>/dev/null | head -1)
[ -n "$T" ] && python3 benchmark/cycle_phases.py $T/e2e_* --accept-len 2.98 --graphs --launches 12 > $OUT/kimi4-phases.txt 2>&1
head -8 $OUT/kimi4-phases.txt 2>/dev/null
pack s13a
say end
# --- call A2, on the warm host, right after A
export FASTPATH_PREFLIGHT_DONE=1; source .devrun/common.sh; rm -rf $BB/*; $B --models $M/kimi4-acc3 --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork --bs 1,8 --acc-len 0 --e2e-runs 3 --profile-steps 12 --server-args '{"mem_fraction_static": 0.65}' --name s13-kimi4-tp1-real3 --budget-s $(left 585) > $L/k4.log 2>&1
# --- here, on the traces: python benchmark/cycle_phases.py raw/e2e-fork-tp1-triton-traces/e2e_* --accept-len 2.98 --graphs --json cycle-phases.json --png timeline.png

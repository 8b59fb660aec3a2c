# session 14 device call A (nvidia-h200, fresh host), after the graph-launch step; .devrun/common.sh:
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
# --- .devrun/s14a.sh (the benchmark part)
draw dense8-m65 dense --layers 8 --draft-miss-rate 0.65
S0="--variant-env tput:SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1 --variant-env tput:SGLANG_SPEC_ADAPTIVE_POLICY=throughput"
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-throughput.json\"}"
# tput first: if its engine still fails at start-up, the fixed process still runs.
$B --models $M/dense8-m65 --variant tput=/tmp/site-fork $S0 --bs 1,8,32,64 --acc-len 0 --e2e-runs 2 --name s14-tput-m65 \
  --server-args "$AD" --budget-s $(left 420) > $L/tput-m65.log 2>&1; say "tput m65 rc=$?"
grep -h "AdaptiveSpeculativeParams\|Capture draft extend\|device-side\|Error" $BB/*tput*/logs/*.log 2>/dev/null | cut -c1-160 | sort | uniq -c | head
$B --models $M/dense8-m65 --variant fixed=/tmp/site-fork --bs 1,8,32,64 --acc-len 0 --e2e-runs 2 --name s14-fixed-m65 \
  --budget-s $(left 570) > $L/fixed-m65.log 2>&1; say "fixed m65 rc=$?"

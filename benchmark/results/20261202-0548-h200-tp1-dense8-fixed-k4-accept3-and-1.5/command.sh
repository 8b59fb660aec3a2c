# session 13 device call D (nvidia-h200, warm host after calls A, A2); .devrun/common.sh:
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
# --- .devrun/s13d.sh
# session 13, call D (warm; dense8-acc3 drawn; draws dense8-m65: accept ~1.5 from 65% seeded misses): issue 12's
# "never below no speculation": fixed K 4 vs --speculative-adaptive with 0019's throughput policy and the steps-0
# draft-extend skip, bs 1/8/32/64, at real accept 3 and ~1.5 (0017/0018/0020/0021 on since the 0.58x of session 9).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
draw dense8-m65 dense --layers 8 --draft-miss-rate 0.65
S0="--variant-env tput:SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1 --variant-env tput:SGLANG_SPEC_ADAPTIVE_POLICY=throughput"
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-throughput.json\"}"
for m in dense8-acc3 dense8-m65; do  # each process runs no speculation, then EAGLE-3: fixed K 4, then adaptive
  $B --models $M/$m --variant fixed=/tmp/site-fork --bs 1,8,32,64 --acc-len 0 --e2e-runs 2 --name s13-fixed-$m \
    --budget-s $(left 580) > $L/fixed-$m.log 2>&1; say "fixed $m rc=$?"
  $B --models $M/$m --variant tput=/tmp/site-fork $S0 --bs 1,8,32,64 --acc-len 0 --e2e-runs 2 --name s13-tput-$m \
    --server-args "$AD" --budget-s $(left 580) > $L/tput-$m.log 2>&1; say "tput $m rc=$?"
done
pack s13d
say end

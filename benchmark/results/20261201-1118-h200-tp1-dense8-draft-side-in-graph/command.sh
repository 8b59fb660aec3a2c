#!/usr/bin/env bash
# Device calls A, B, E, F on nvidia-h200 (2026-12-01 session 9), from the repository root, slim bundle
# in .carry/bundle (patches 0001-0020; 0018 and 0020 then default off), the scripts carried as .devrun/.
# .devrun/common.sh:
#   # sourced by the s9* device scripts: the e2e benchmark line for dense-8 TP1 on one H200
#   source test/gpu/device_env.sh
#   BB=/tmp/bb; mkdir -p $BB
#   B="python3 benchmark/run.py --profile all --kinds e2e --configs tp1 --backends triton --ks 4 --topks 1 --models $M/dense8 --no-plot --out $BB"
#   NX="--variant-env next:SGLANG_ENABLE_DRAFT_EXTEND_SELECT_IN_GRAPH=1 --variant-env next:SGLANG_ENABLE_TRITON_DRAFT_METADATA_IN_GRAPH=1"
#   draw_dense8() { [ -f $M/dense8/target/config.json ] || python3 -m sglang_fastpath models dense --layers 8 --device cuda --out $M/dense8 > $OUT/dense8-draw.log 2>&1; }
#   pack() {  # NAME: tar the benchmark folders and logs into $OUT (only 8 files come back)
#     mkdir -p /tmp/pack-$1; cp -r $BB /tmp/pack-$1/bb; find $OUT -maxdepth 1 -type f ! -name '*.tgz' -exec mv {} /tmp/pack-$1/ \;
#     [ -d $OUT/logs ] && mv $OUT/logs /tmp/pack-$1/
#     tar czf $OUT/$1.tgz -C /tmp/pack-$1 . 2>/dev/null
#     for f in $BB/*/results.json; do echo "== $f"; python3 - "$f" <<'PY'
#   import json, sys
#   r = json.load(open(sys.argv[1]))
#   for x in r["records"]:
#       print(x["variant"], x["mode"], "bs", x["bs"], x["metric"], round(x["value"], 2), [round(v, 1) for v in x.get("rounds") or []])
#   for e in r.get("errors") or []:
#       print("ERROR", str(e)[:300])
#   PY
#     done 2>&1 | tee $OUT/$1-summary.txt
#   }
# ---- .devrun/s9a.sh
# call A (fresh host): install + preflight, draw dense-8, GPU parity of 0018 and 0018+0020 on the tiny pair,
# then e2e real-acceptance greedy parity of 'next' (0018+0020 on) on dense-8 bs 1,8
source .devrun/common.sh
say "start"
draw_dense8 & DRAW=$!
FASTPATH_TIMEOUT=220 bash test/gpu/run_on_device.sh test/gpu/test_parity.py -k "draft_side_graph_work and tiny" -rA > $OUT/parity-tiny.log 2>&1; say "parity tiny rc=$?"
tail -15 $OUT/parity-tiny.log
wait $DRAW; say "dense8 drawn"
$B --variant next=/tmp/site-fork $NX --bs 1,8 --acc-len 0 --e2e-runs 1 --name next-parity-real --budget-s $(left 570) > $OUT/parity-real.log 2>&1; say "real-acceptance rc=$?"
tail -25 $OUT/parity-real.log
pack s9a
# ---- .devrun/s9b.sh
# call B (warm host): fork (0001-0020 defaults) vs next (0018+0020 on), accept length 3, bs 1/8/32, 2 alternating rounds
source .devrun/common.sh; rm -rf $BB/*
draw_dense8
$B --variant fork=/tmp/site-fork --variant next=/tmp/site-fork $NX --bs 1,8,32 --acc-len 3 --e2e-runs 3 --e2e-repeats 2 --name next-acc3 --budget-s $(left 560) > $OUT/next-acc3.log 2>&1; say "acc3 rc=$?"
tail -30 $OUT/next-acc3.log
pack s9b
# ---- .devrun/s9e.sh
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
# call E (warm host): one more round of next (0018+0020 on) then fork, reverse order of call B, acc 3
source .devrun/common.sh; rm -rf $BB/*
draw_dense8
$B --variant next=/tmp/site-fork --variant fork=/tmp/site-fork $NX --bs 1,8,32 --acc-len 3 --e2e-runs 3 --name next-acc3-r3 --budget-s $(left 370) > $OUT/next-acc3-r3.log 2>&1; say "acc3 rc=$?"
tail -22 $OUT/next-acc3-r3.log
pack s9e
# ---- .devrun/s9f.sh
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
# call F (warm host): one more round of next (0018+0020 on) then fork, reverse order of call B, acc 3
source .devrun/common.sh; rm -rf $BB/*
draw_dense8
$B --variant fork=/tmp/site-fork --variant next=/tmp/site-fork $NX --bs 1,8 --acc-len 3 --e2e-runs 3 --name next-acc3-r4 --budget-s $(left 175) > $OUT/next-acc3-r4.log 2>&1; say "acc3 rc=$?"
tail -22 $OUT/next-acc3-r4.log
pack s9f

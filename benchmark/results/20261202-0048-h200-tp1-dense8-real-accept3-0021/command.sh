#!/usr/bin/env bash
# Device calls A-D of 2026-12-02 session 11 (nvidia-h200, one host kept warm from A to D), from the repository root,
# slim bundle in .carry/bundle (patches 0001-0021 as landed in 0119d22, 0021 off by default), scripts carried as .devrun/.
# benchmark/results left the index for the calls (.devrun/slim.sh on/off) so that tree + bundle fit 64 MiB.
# ---- .devrun/common.sh
# sourced by the s11* device scripts (session 11), from the repository root
#   source test/gpu/device_env.sh
#   export PYTHONPATH=$PWD/python:$PYTHONPATH  # this tree's sglang_fastpath before the bundle's
#   BB=/tmp/bench; L=/tmp/logs; mkdir -p $BB $L
#   B="python3 benchmark/run.py --profile all --kinds e2e --configs tp1 --backends triton --ks 4 --topks 1 --no-plot --out $BB"
#   AC="--variant-env accept:SGLANG_ENABLE_VERIFY_ACCEPT_IN_GRAPH=1"
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
# ---- .devrun/s11a.sh
# call A (fresh nvidia-h200): install; draw dense-8 with a periodic miss (real accept length 3) and the tiny pair
#   # with 30% misses; 1) the GPU gate's real-rejection shard (tiny, predicted acceptance, 4 variants);
#   # 2) 0021 off/on at real accept 3 on dense-8, bs 1/8/32, alternating rounds (each e2e job also checks greedy parity).
#   set -uo pipefail
#   source .devrun/common.sh
#   say "start"
#   draw dense8-acc3 dense --layers 8 --draft-accept-length 3
#   python3 -m sglang_fastpath models tiny --draft-miss-rate 0.3 --out $M/tiny-misses > $L/draw-tiny-misses.log 2>&1
#   say "tiny-misses: $(grep oracle: $L/draw-tiny-misses.log)"
#   OUT=$OUT timeout 230 python3 -m pytest -x -q -p no:cacheprovider test/gpu/test_parity.py -k "rejected_drafts and not no_cuda_graph and not eager_paths" > $L/gate-rr.log 2>&1
#   say "gate real rejection rc=$?"; tail -5 $L/gate-rr.log
#   mkdir -p $L/engines; cp -r $OUT/engines/. $L/engines/ 2>/dev/null; rm -rf $OUT/engines
#   $B --models $M/dense8-acc3 --variant fork=/tmp/site-fork --variant accept=/tmp/site-fork $AC --bs 1,8,32 --acc-len 0 \
#     --e2e-runs 5 --name s11-acc3-real-r1 --budget-s $(left 560) > $L/acc3-r1.log 2>&1; say "acc3 r12 rc=$?"
#   pack s11a
#   say end
# ---- .devrun/s11b.sh
# call B (warm after A): 0021 off/on at real accept 3 on dense-8 (periodic miss), bs 1/8/32, alternating
#   # accept, fork, accept; each e2e job checks greedy parity with real rejection.
#   set -uo pipefail
#   [ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
#   source .devrun/common.sh; rm -rf $BB/*
#   $B --models $M/dense8-acc3 --variant accept=/tmp/site-fork --variant fork=/tmp/site-fork $AC --bs 1,8,32 --acc-len 0 \
#     --e2e-runs 5 --e2e-repeats 2 --name s11-acc3-real-r23 --budget-s $(left 570) > $L/acc3-r23.log 2>&1; say "acc3 r23 rc=$?"
#   pack s11b
#   say end
# ---- .devrun/s11c.sh
# call C (warm after B): the real-rejection gate shard's remaining variants (tiny, 30% misses), then one more
#   # alternating round at real accept 3 on dense-8: fork first, then accept.
#   set -uo pipefail
#   [ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
#   source .devrun/common.sh; rm -rf $BB/*
#   OUT=$OUT timeout 200 python3 -m pytest -q -p no:cacheprovider test/gpu/test_parity.py -k "rejected_drafts and not defaults" > $L/gate-rr2.log 2>&1
#   say "gate real rejection rc=$?"; tail -5 $L/gate-rr2.log
#   mkdir -p $L/engines2; cp -r $OUT/engines/. $L/engines2/ 2>/dev/null; rm -rf $OUT/engines
#   $B --models $M/dense8-acc3 --variant fork=/tmp/site-fork --variant accept=/tmp/site-fork $AC --bs 1,8,32 --acc-len 0 \
#     --e2e-runs 5 --name s11-acc3-real-r4 --budget-s $(left 570) > $L/acc3-r4.log 2>&1; say "acc3 r4 rc=$?"
#   pack s11c
#   say end
# ---- call D (one command):
#   [ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1; source .devrun/common.sh
#   OUT=$OUT timeout 175 python3 -m pytest -q -p no:cacheprovider test/gpu/test_parity.py -k "rejected_drafts and eager_paths"

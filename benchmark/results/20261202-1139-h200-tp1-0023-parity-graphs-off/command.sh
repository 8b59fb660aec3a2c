# session 15 device call A (nvidia-h200, fresh host; slim bundle of commit e888d27: patches 0001-0023, 0023 on by default). .devrun/common.sh:
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

# .devrun/s15a.sh:
# session 15, call A (fresh nvidia-h200; carry .carry .devrun; device_tree.sh hide before, restore after):
# issue 12: what does a steps-0 cycle (speculation turned down) do on the host that a decode step does not?
# adaptive-steps0.json holds every slot at steps 0; SKIP_ZERO_STEP skips its draft extend. One process: plain
# decode, then steps-0 EAGLE-3, bs 1/32/64, timed, then 12 profiled steps each; cycle_phases on the traces.
# Then 0023's parity with graphs off (the default now) and the prefill-kernel variant, ~2x100 s.
set -uo pipefail
source .devrun/common.sh; rm -rf $BB/*
say "start"
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
AD="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-steps0.json\"}"
# s0: draft extend skipped (SKIP_ZERO_STEP); s0sync: the 1-token draft extend kept (a real EAGLE-3 draft needs it)
$B --models $M/dense8-acc3 --variant s0=/tmp/site-fork --variant-env s0:SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1 \
  --variant s0sync=/tmp/site-fork --bs 1,32,64 --acc-len 0 --e2e-runs 3 --profile-steps 12 --server-args "$AD" \
  --name s15-steps0-profile --budget-s $(left 380) > $L/s0.log 2>&1; say "steps0 rc=$?"
for v in s0 s0sync; do
  T=$(ls -d $BB/*/raw/e2e-$v-*traces 2>/dev/null | head -1)
  [ -n "$T" ] && timeout 60 python3 benchmark/cycle_phases.py $T/e2e_* --graphs --launches 12 --slow-calls > $BB/$v-phases.txt 2>&1
  head -12 $BB/$v-phases.txt 2>/dev/null
done
OUT=$BB/gate timeout $(left 560) python3 -m pytest -q -p no:cacheprovider test/gpu/test_parity.py \
  -k "rejected_drafts and (no_cuda_graph or draft_extend_prefill_kernel)" > $BB/parity-0023.txt 2>&1
say "parity rc=$?"; tail -3 $BB/parity-0023.txt
pack s15a   # one archive: the soak's and the tests' files do not count against the 8 files that come back
say end

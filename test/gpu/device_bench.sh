# shellcheck shell=bash disable=SC2034  # sourced: B, B2, ALL3, BF16, KSET, KOFF, SKIP0, S0_KIMI, ALL3_VARS, ALL3_BF16_VARS, KV_ONLY_VAR, STEPS0_VARS, LEAN_VARS, S0_VS_LEAN, OFF_VARS and the functions are for the caller
# Sourced by a device call's benchmark script, from the repository root, on the GPU host (after a fresh
# checkout the git-ignored .devrun/ is gone; this is what every session's .devrun/common.sh held):
#   source test/gpu/device_bench.sh
#   draw dense8-acc3 dense --layers 8 --draft-accept-length 3
#   $B --models $M/dense8-acc3 --variant all3=/tmp/site-fork $ALL3 --bs 1,64 --server-args "$KSET" ... --budget-s $(left 300)
#   pack NAME
# It sources device_env.sh (bundle install, offline environment, T0/left/say/M), then defines BB (benchmark output),
# L (logs), B (benchmark/run.py's e2e command at TP 1, triton, K 4; B2 the same at tp2-pcie, for x2 hosts), ALL3 (patches 0024, 0026 and 0027 on, with the
# cycle stats, for a variant named all3), BF16 (patch 0030 on as well, added after $ALL3), KSET (server args for the adaptive K set 2/3/4/6/8 of
# benchmark/configs/adaptive-ks.json), KOFF (the same plus steps 0, adaptive-ks-off.json), SKIP0 (steps 0 without its draft
# extend, for a variant named all3: an upper bound for a turned-down state, since a real draft's KV falls behind),
# ALL3_VARS, ALL3_BF16_VARS and KV_ONLY_VAR (the same switches by name, for any variant:
# variant_env NAME $ALL3_BF16_VARS $KV_ONLY_VAR SGLANG_SPEC_STEPS0_AS_DECODE; ALL3 and BF16 are made with it),
# S0_KIMI and STEPS0_VARS (server args holding every kimi16 batch size at steps 0, and a steps-0 cycle's switches),
# LEAN_VARS and S0_VS_LEAN (the same plus patch 0043's lean cycle; two variants s0 and lean, without and with it),
# OFF_VARS (STEPS0_VARS plus patches 0045-0047's off path),
# and draw, stock_held_site, policy_debug_log and step_shares (the throughput policy's per-result lines), summ,
# cycle_ms (every cycle_ms record, each phase's GPU ms) and pack.
# Habits: write every call's script before the first call, and issue the next one within 30 s of a reply (the host
# is given back after ~30 s idle: a fresh one redraws its models). For kimi runs build the bundle with
# --jit-cache build/cache/jit/sm90 (docs/bundle.md; made on the CPU machine by test/gpu/build_jit_cache.sh, ~5 min,
# build/ is gone in a fresh checkout): its install seeds the Marlin MoE kernel, so warm-jit returns at once instead of
# compiling for ~300 s.
source test/gpu/device_env.sh
export PYTHONPATH=$PWD/python:$PYTHONPATH  # this tree's sglang_fastpath before the bundle's
# A warm host keeps what the previous call left: session 30's serving call ran out inside a server's start-up and
# that server held 97 GiB, so every engine of the next call failed. Clear SGLang processes left by an earlier call
# (the brackets keep pgrep from matching its own command line).
LEFTOVER=$(pgrep -f '[s]glang::|[l]aunch_server' | tr '\n' ' ')
if [ -n "$LEFTOVER" ]; then
  say "killing SGLang processes left by an earlier call: $LEFTOVER"
  kill -9 $LEFTOVER 2>/dev/null; sleep 5
fi
BB=/tmp/bench; L=/tmp/logs; mkdir -p $BB $L
B="python3 benchmark/run.py --profile all --kinds e2e --configs tp1 --backends triton --ks 4 --topks 1 --no-plot --out $BB"
B2="python3 benchmark/run.py --profile all --kinds e2e --configs tp2-pcie --backends triton --ks 4 --topks 1 --no-plot --out $BB"
variant_env() {  # NAME VAR[=VALUE]...: --variant-env NAME:VAR=VALUE for each (VALUE 1 when not given)
  local n=$1 v; shift
  for v in "$@"; do [[ $v == *=* ]] || v="$v=1"; printf -- '--variant-env %s:%s ' "$n" "$v"; done
}
# The switches of ALL3 (patches 0024, 0026, 0027 and the cycle stats) and of BF16 (patch 0030) by name, for any
# variant, and 0034's (steps 0 writes only the draft's KV).
ALL3_VARS="SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM SGLANG_TRITON_SHARED_GRAPH_STATE SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN"
ALL3_VARS="$ALL3_VARS SGLANG_SPEC_CYCLE_STATS"
ALL3_BF16_VARS="$ALL3_VARS SGLANG_CUDA_GRAPH_BF16_VERIFY_LOGITS"
KV_ONLY_VAR=SGLANG_SPEC_KV_ONLY_ZERO_STEP_DRAFT_EXTEND
ALL3=$(variant_env all3 $ALL3_VARS)
BF16=$(variant_env all3 SGLANG_CUDA_GRAPH_BF16_VERIFY_LOGITS)  # with $ALL3: patch 0030 on too
KSET="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\"}"
KOFF="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-off.json\"}"
# Every batch size held at steps 0 (kimi16's memory and decode-graph cap), and the switches of a steps-0 cycle as
# measured since session 28: ALL3 + BF16, 0034's KV-only draft write, 0037's plain DECODE step, and (since session
# 31, benchmark/results/20261204-1648-h200-tp1-kimi16-steps0-deferred-kv/) 0038's KV rows written 16 cycles at a time.
S0_KIMI="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-steps0.json\", \"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 32}"
STEPS0_VARS="$ALL3_BF16_VARS $KV_ONLY_VAR SGLANG_SPEC_STEPS0_AS_DECODE SGLANG_SPEC_KV_ONLY_DEFER_CYCLES=16"
LEAN_VARS="$STEPS0_VARS SGLANG_SPEC_STEPS0_LEAN_CYCLE"  # patch 0043 on top
S0_VS_LEAN="--variant s0=/tmp/site-fork --variant lean=/tmp/site-fork $(variant_env s0 $STEPS0_VARS) $(variant_env lean $LEAN_VARS)"
OFF_VARS="$STEPS0_VARS SGLANG_SPEC_OFF_PATH"  # patches 0045-0047: a steps-0 batch served as a plain decode cycle
SKIP0="--variant-env all3:SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1"  # steps 0 without its draft extend (draft KV left behind)
stock_held_site() {  # echo a copy of the stock site with patch 0040's logging alone, made once per host
  # (benchmark/patches/stock-graph-memory-held.patch): a variant on it reads stock's graph_held_gb. Its files come
  # patched from .carry/stock-held (test/gpu/stock_held_files.sh, run before the call), else git or patch here.
  local site=/tmp/site-stock-held stock=${SGLANG_FASTPATH_SITE_STOCK:-/tmp/site-stock}
  local patch=$PWD/benchmark/patches/stock-graph-memory-held.patch carried=$PWD/.carry/stock-held/sglang
  if [ ! -f $site/.held-patch ]; then
    rm -rf $site && cp -a $stock $site || { say "stock_held_site: could not copy $stock"; return 1; }
    if [ -d "$carried" ]; then
      cp -r "$carried/." $site/sglang/
    else
      (cd $site && { git apply -p2 "$patch" || patch -s -p2 < "$patch"; })
    fi && touch $site/.held-patch || { say "stock_held_site: could not patch $site"; return 1; }
  fi
  echo $site
}
draw() {  # NAME ARGS...: draw a model pair into $M/NAME unless it is there
  local n=$1; shift
  [ -f "$M/$n/target/config.json" ] || python3 -m sglang_fastpath models "$@" --device cuda --out "$M/$n" > "$L/draw-$n.log" 2>&1
  say "drawn $n: $(tail -2 "$L/draw-$n.log" 2>/dev/null | head -1 | cut -c1-160)"
}
policy_debug_log() {  # write a logging config that logs each throughput-policy result (patch 0051's debug line);
  # echo the variable that points SGLang at it, for variant_env
  local cfg=/tmp/fastpath-policy-debug.json
  cat > $cfg <<'JSON'
{"version": 1, "disable_existing_loggers": false,
 "formatters": {"plain": {"format": "[%(asctime)s] %(message)s", "datefmt": "%Y-%m-%d %H:%M:%S"}},
 "handlers": {"err": {"class": "logging.StreamHandler", "formatter": "plain", "stream": "ext://sys.stderr"}},
 "root": {"level": "INFO", "handlers": ["err"]},
 "loggers": {"sglang.srt.speculative.adaptive_spec_params": {"level": "DEBUG"}}}
JSON
  echo SGLANG_LOGGING_CONFIG_PATH=$cfg
}
step_shares() {  # FILE: gather the per-result lines of every log under $BB into FILE; print each slot's share of
  # results at each step count
  grep -h "result [0-9]* since the switch" $BB/*/logs/*.log > "$1" 2>/dev/null
  python3 - "$1" <<'PY'
import collections, re, sys
ran = collections.Counter()
for line in open(sys.argv[1]):
    m = re.search(r"slot \((.*?)\): steps (\d+), result", line)
    if m:
        ran[m[1], int(m[2])] += 1
for slot in sorted({s for s, _ in ran}):
    n = sum(c for (s, _), c in ran.items() if s == slot)
    print(f"{slot} results by steps: " + ", ".join(f"{k}: {100 * c // n}%" for (s, k), c in sorted(ran.items()) if s == slot))
PY
}
summ() {  # print every results.json record under $BB, one line each
  for f in "$BB"/*/results.json; do echo "== $f"; python3 - "$f" <<'PY'
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
switches() {  # the adaptive slots' decisions and state builds of every process under $BB, into $BB/switches.txt
  for d in "$BB"/*/logs; do echo "== $d"; grep -h "Switch adaptive\|Adaptive throughput slot\|Built adaptive" "$d"/*.log \
    | sed 's/^\[[^]]*\] //' | head -200; done > "$BB/switches.txt"
}
cycle_ms() {  # print every cycle_ms record under $BB: mode, bs, the cycle and each phase's GPU ms
  python3 - "$BB" <<'PY'
import glob, json, sys
for f in sorted(glob.glob(f"{sys.argv[1]}/*/raw/*.jsonl")):
    for line in open(f):
        r = json.loads(line)
        if r.get("type") == "record" and r["metric"] == "cycle_ms":
            phases = {k: v for k, v in r["extra"].items() if k.endswith("_ms")}
            print(f.rsplit("/", 1)[1], r["mode"], r["bs"], "cycle_ms", round(r["value"], 3), phases)
PY
}
pack() {  # NAME: the benchmark folders and logs into $OUT/NAME.tgz (8 files come back at most), without this
  # host's paths (the checkout, the venv, $OUT, home: benchmark/driver/portable.py, as a results folder must be)
  summ > "$OUT/$1-summary.txt" 2>&1; switches; cp -r "$L" "$BB/" 2>/dev/null
  python3 -m benchmark.driver.portable --repo-root "$PWD" --python "$(command -v python3)" \
    --venv "$(python3 -c 'import sys; print(sys.prefix)')" --out "$OUT" --home "$HOME" "$BB" > /dev/null 2>&1 \
    || say "pack: portable failed; the folders keep this host's paths"
  tar czf "$OUT/$1.tgz" -C "$BB" . 2>/dev/null
  cat "$OUT/$1-summary.txt"
}

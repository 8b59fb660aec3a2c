#!/usr/bin/env bash
# The GPU correctness gate in one device call (nvidia-h200-x2; on 1 GPU only the TP1 shards):
#   bash test/gpu/gate.sh            # with the slim bundle carried in .carry/bundle
# The models are made first (tiny, tiny with draft misses, oracle, dense 4 layers), then every shard below runs at
# once as its own pytest process: the cases check outputs and counts, not speed, so they
# may share the GPUs (engines.py caps each engine's memory). Engine records, pytest output
# and a summary (test/gpu/summarize_engines.py) land in $OUT; GATE_BUDGET_S (default 420)
# bounds the shards. GATE_SHARDS (space-separated names) runs a subset. Install, preflight and the
# environment come from test/gpu/device_env.sh (its preflight is skipped when the caller already ran
# it: FASTPATH_PREFLIGHT_DONE=1, or GATE_SKIP_PREFLIGHT=1). The tp2-kimi shard first builds the
# Marlin MoE kernel (sglang-fastpath warm-jit; 273 s on a fresh H200 host) while its model is drawn,
# inside its budget: on a fresh host run it alone, GATE_SHARDS=tp2-kimi GATE_BUDGET_S=520.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 3
[ -z "${GATE_SKIP_PREFLIGHT:-}" ] || export FASTPATH_PREFLIGHT_DONE=1
# shellcheck source=test/gpu/device_env.sh
source test/gpu/device_env.sh
BUDGET=${GATE_BUDGET_S:-420}
gpus=$(nvidia-smi -L | wc -l)
make_models() {
  [ -f "$M/tiny/target/config.json" ] || python3 -m sglang_fastpath models tiny --out "$M/tiny" || return 1
  [ -f "$M/oracle/target/config.json" ] || python3 -m sglang_fastpath models oracle --out "$M/oracle" || return 1
  [ -f "$M/tiny-misses/target/config.json" ] || python3 -m sglang_fastpath models tiny --draft-miss-rate 0.3 \
    --out "$M/tiny-misses" || return 1
  [ -f "$M/dense/target/config.json" ] || python3 -m sglang_fastpath models dense --layers 4 --device cuda \
    --out "$M/dense" || return 1
}
make_models > "$OUT/models.log" 2>&1 || { tail -20 "$OUT/models.log"; exit 3; }
echo "[gate t=$(( $(date +%s) - T0 ))s] models ready in $M"

# The kimi pair's first start on a fresh host compiles SGLang's Marlin MoE kernel (273 s on H200)
# inside its first graph capture: build it first (warm-jit), drawing the model meanwhile.
prep_kimi() {
  local dir=$1 pid=
  if [ ! -f "$M/kimi/target/config.json" ]; then
    python3 -m sglang_fastpath models kimi --layers 4 --device cuda --out "$M/kimi" > "$dir/models.log" 2>&1 &
    pid=$!
  fi
  python3 -m sglang_fastpath warm-jit > "$dir/warm-jit.log" 2>&1
  [ -z "$pid" ] || wait "$pid"
}

# name | CUDA_VISIBLE_DEVICES | pytest arguments
SHARDS=(
  "tp1-tiny|0|test/gpu/test_parity.py -k tiny_models-1"
  "tp1-dense|1|test/gpu/test_parity.py -k dense_models-1"
  "tp1-oracle|1|test/gpu/test_parity.py -k oracle"
  "tp1-real-rejection|0|test/gpu/test_parity.py -k rejected_drafts"
  "tp1-adaptive|0|test/gpu/test_adaptive_gpu.py"
  "tp1-metadata-in-graph|1|test/gpu/test_parity.py -k metadata_filled_in_the_graph"
  "tp1-select-in-graph|1|test/gpu/test_parity.py -k draft_side_graph_work"
  "tp1-accept-in-graph|0|test/gpu/test_parity.py -k 'verify_accept_in_graph and tp1'"
  "tp2-accept-in-graph|0,1|test/gpu/test_parity.py -k 'verify_accept_in_graph and tp2'"
  "tp2-tiny|0,1|test/gpu/test_parity.py -k tiny_models-2"
  "tp2-dense|0,1|test/gpu/test_parity.py -k dense_models-2"
  "tp2-eager-verify|0,1|test/gpu/test_verify_allreduce.py -k eager_verify"
  "tp2-forced-and-graphed|0,1|test/gpu/test_verify_allreduce.py -k 'forced or graphed'"
  "tp2-kimi|0,1|test/gpu/test_parity.py -k kimi"
)
pids=() names=()
for shard in "${SHARDS[@]}"; do
  IFS='|' read -r name devices args <<< "$shard"
  [ -z "${GATE_SHARDS:-}" ] || [[ " $GATE_SHARDS " == *" $name "* ]] || continue
  [ "$gpus" -ge 2 ] || [[ "$devices" != *,* ]] || { echo "[gate] $name skipped: needs 2 GPUs"; continue; }
  [ "$gpus" -ge 2 ] || devices=0
  mkdir -p "$OUT/$name"
  argv=(); eval "argv=($args)"  # the shard table quotes -k expressions
  ( s0=$(date +%s)
    [ "$name" != tp2-kimi ] || CUDA_VISIBLE_DEVICES=$devices prep_kimi "$OUT/$name"
    rem=$(( BUDGET - $(date +%s) + s0 )); [ "$rem" -gt 0 ] || rem=1  # timeout 0 would mean none
    CUDA_VISIBLE_DEVICES=$devices OUT=$OUT/$name timeout -k 10 "$rem" \
      python3 -m pytest -v -rA -p no:cacheprovider "${argv[@]}" > "$OUT/$name/pytest.txt" 2>&1
    echo "[gate t=$(( $(date +%s) - T0 ))s] $name: $(tail -1 "$OUT/$name/pytest.txt")" ) &
  pids+=($!) names+=("$name")
done
wait "${pids[@]}"
python3 test/gpu/summarize_engines.py "$OUT"/*/engines --out "$OUT/summary.json"
tar -C "$OUT" -czf "$OUT/gate.tgz" "${names[@]}" summary.json
rc=0
for name in "${names[@]}"; do  # a shard passes only with a pytest summary that has passes and no failure
  last=$(tail -1 "$OUT/$name/pytest.txt")
  [[ "$last" == *passed* && "$last" != *failed* && "$last" != *error* ]] || { echo "[gate] FAIL $name: $last"; rc=1; }
done
echo "[gate t=$(( $(date +%s) - T0 ))s] rc=$rc"
exit $rc

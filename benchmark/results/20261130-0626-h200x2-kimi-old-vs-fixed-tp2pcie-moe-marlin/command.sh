# Call (nvidia-h200-x2, warm after kimi.sh: model and Marlin JIT cache on the host): kimi tp2-pcie micro,
# old vs fixed, MoE on Marlin (default), 2 alternating rounds; then the kimi greedy-parity test.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_env.sh
mkdir -p "$OUT/logs"
[ -f $M/kimi/target/config.json ] || python3 -m sglang_fastpath models kimi --layers 4 --device cuda --out $M/kimi > "$OUT/logs/kimi-models.log" 2>&1
say "micro, MoE on marlin"
timeout "$(left 400)" python3 benchmark/run.py --profile all --kinds micro --configs tp2-pcie --backends triton \
  --bs 1,8 --ks 4 --topks 1 --eager --iters 10 --repeats 2 \
  --variant old=/tmp/site-fork --variant-env old:SGLANG_TEST_FORCE_PCG_FLAG_IN_VERIFY=1 \
  --variant-env old:SGLANG_ALL_REDUCE_STATS=1 --variant fixed=/tmp/site-fork --variant-env fixed:SGLANG_ALL_REDUCE_STATS=1 \
  --models $M/kimi --out /tmp/bench2 --name kimi-old-vs-fixed-tp2pcie-moe-marlin --budget-s "$(left 395)" --no-plot 2>&1 | tail -24
tar -C /tmp/bench2 -czf "$OUT/bench.tgz" . ; say "micro done"
mkdir -p "$OUT/kimi-parity"
CUDA_VISIBLE_DEVICES=0,1 OUT=$OUT/kimi-parity timeout -k 10 "$(left 585)" python3 -m pytest -v -rA -p no:cacheprovider \
  test/gpu/test_parity.py -k kimi > "$OUT/kimi-parity/pytest.txt" 2>&1
say "kimi parity: $(tail -1 "$OUT/kimi-parity/pytest.txt")"
tar -C "$OUT" -czf "$OUT/kimi-parity.tgz" kimi-parity && rm -rf "$OUT/kimi-parity"; say end

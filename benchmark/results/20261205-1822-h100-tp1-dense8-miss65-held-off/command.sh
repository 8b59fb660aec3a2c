# session 42 device call 1 (fresh host, nvidia-h100-x1): bash test/gpu/queue/s41b.sh (this folder: its held run)
# session 41, call B (fresh or warm nvidia-h200 / nvidia-h100-x1; ~340 s: two dense-8 processes). Issue 12, patch 0053
# (the throughput policy through slow stretches that every step count shares) on its first GPU run. Session 41's
# `s40b.sh` (benchmark/results/20261205-1600-h100-tp1-dense8-miss65-koff-off-samples/, one H100) logged stretches of
# 5-50 slow results that moved the slot off steps 0: with the off path the policy ran 0.57x / 0.60x plain decode at
# bs 1 / 64, where the off path held at steps 0 ran 0.85x / 0.82x on the same host
# (benchmark/results/20261205-1557-h100-tp1-dense8-steps0-held-off-traces/). On CPU, that record replayed under 0053
# reaches 0.96 / 0.97 of the best fixed step count (0.84 / 0.94 before; benchmark/tools/adaptive_replay.py). Here, on
# one host: `policy` (dense8-miss65, `adaptive-ks-off.json`, the off path, 0051's per-result debug line on; bs 1 / 64,
# 2 runs after a 256-token warm-up, as `s40b.sh`) then `held` (the same pair and lengths, every slot held at steps 0
# with the off path: what the policy can reach). Read: `policy` / `held` against session 41's 0.67 / 0.73, the share
# of results at steps 0 in the samples, greedy parity in each.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw dense8-miss65 dense --layers 8 --draft-miss-rate 0.65
LOGCFG=/tmp/fastpath-policy-debug.json
cat > $LOGCFG <<'JSON'
{"version": 1, "disable_existing_loggers": false,
 "formatters": {"plain": {"format": "[%(asctime)s] %(message)s", "datefmt": "%Y-%m-%d %H:%M:%S"}},
 "handlers": {"err": {"class": "logging.StreamHandler", "formatter": "plain", "stream": "ext://sys.stderr"}},
 "root": {"level": "INFO", "handlers": ["err"]},
 "loggers": {"sglang.srt.speculative.adaptive_spec_params": {"level": "DEBUG"}}}
JSON
V="--variant policy=/tmp/site-fork $(variant_env policy $OFF_VARS SGLANG_LOGGING_CONFIG_PATH=$LOGCFG)"
$B --models $M/dense8-miss65 $V --bs 1,64 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$KOFF" \
  --name dense8-miss65-koff-off-0053 --budget-s $(left 560) > $L/b-policy.log 2>&1
say "policy (0053) rc=$?"
S0="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-steps0.json\"}"
$B --models $M/dense8-miss65 --variant held=/tmp/site-fork $(variant_env held $OFF_VARS) --bs 1,64 --acc-len 0 --e2e-runs 2 \
  --e2e-warmup-len 256 --server-args "$S0" --name dense8-miss65-held-off --budget-s $(left 560) > $L/b-held.log 2>&1
say "held rc=$?"
grep -h "result [0-9]* since the switch" $BB/*/logs/*.log > $L/slot-samples.txt 2>/dev/null
python3 - $L/slot-samples.txt <<'PY'
import collections, re, sys
ran = collections.Counter()
for line in open(sys.argv[1]):
    m = re.search(r"slot \((.*?)\): steps (\d+), result", line)
    if m:
        ran[m[1], int(m[2])] += 1
for slot in sorted({s for s, _ in ran}):
    total = sum(n for (s, _), n in ran.items() if s == slot)
    print(slot, "results by steps:", ", ".join(f"{k}: {n / total:.0%}" for (s, k), n in sorted(ran.items()) if s == slot))
PY
summ
pack s41b

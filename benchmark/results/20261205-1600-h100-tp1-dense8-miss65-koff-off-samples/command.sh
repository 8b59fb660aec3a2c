# session 41 device call 5 (warm host): bash test/gpu/queue/s40b.sh
# session 40, call B (fresh or warm nvidia-h200 / nvidia-h100-x1; ~220 s: one dense-8 process). Issue 12: why the
# throughput policy keeps drafting at bs 1 / 64 at accept ~1.5 with the spec off path. Session 40 (one H100,
# benchmark/results/20261205-1325-h100-tp1-dense8-miss65-koff-off-path/): each visit to steps 0 timed the off cycle at
# 2.27 ms (bs 1) and 3.06-4.16 ms (bs 64) against 2.16 / 2.68 ms held, while the drafting estimates matched the run,
# so the slot kept drafting (0.76x / 0.64x plain decode; the held off path 0.84x / 0.78x). Here session 40's `s35e.sh off` run (its command.sh in that folder) at
# bs 1 / 64 with patch 0051's per-result debug line switched on for the policy's module alone
# (SGLANG_LOGGING_CONFIG_PATH): every result's time since the slot's previous one, its step count and its place since
# the switch. The table at the end gives the median time by place since the switch, per bs and step count.
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
V="--variant off=/tmp/site-fork $(variant_env off $OFF_VARS SGLANG_LOGGING_CONFIG_PATH=$LOGCFG)"
$B --models $M/dense8-miss65 $V --bs 1,64 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 --server-args "$KOFF" \
  --name dense8-miss65-koff-off-samples --budget-s $(left 560) > $L/b-off.log 2>&1
say "dense8 miss65 koff off, per-result samples rc=$?"
grep -h "result [0-9]* since the switch" $BB/*/logs/*.log > $L/slot-samples.txt 2>/dev/null
python3 - $L/slot-samples.txt <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.search(r"slot \((.*?)\): steps (\d+), result (\d+) since the switch, ([\d.]+) ms", line)
    if m:
        rows.setdefault((m[1], int(m[2]), min(int(m[3]), 9)), []).append(float(m[4]))
print("slot     steps  place  n     median ms  (place 9 = 9 or later)")
for (slot, steps, place), v in sorted(rows.items()):
    print(f"{slot:8} {steps:5}  {place:5}  {len(v):4}  {statistics.median(v):9.3f}")
PY
summ
pack s40b

# session 31 device calls A (fresh nvidia-h200) and A' (the same host, warm; the d16 variant alone, A's budget having skipped it); slim bundle of commit 83766f7, patches 0001-0038: test/gpu/queue/s31a.sh as of that commit; A' ran it after: sed -i 's/^V="--variant s0=\/tmp\/site-fork --variant d16=/V="--variant d16=/; s/\$(variant_env s0 \$STEPS0_VARS) //; s/left 560/left 580/' test/gpu/queue/s31a.sh
# session 31, call A (fresh nvidia-h200; slim bundle with patches 0001-0038; a full call, ~450 s). Issue 12: patch 0038
# (SGLANG_SPEC_KV_ONLY_DEFER_CYCLES=16: the steps-0 KV-only rows kept and written 16 cycles at a time) side by side with
# the per-cycle KV-only extend, every bs held at steps 0 (adaptive-steps0.json), plain decode in each process, bs 1 / 8,
# 3 runs, greedy parity. Session 30 (s30a.sh): the steps-0 cycle is GPU-bound, 3.955 ms at bs 1 = the target's 3.819 +
# the KV-only extend's 0.134 (plain decode 3.814); 7.157 = 7.006 + 0.150 at bs 8 (plain 6.988). Expected with 0038: the
# extend's share falls ~16x, so the cycle lands within ~1% of plain decode.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
V="--variant s0=/tmp/site-fork --variant d16=/tmp/site-fork"
V="$V $(variant_env s0 $STEPS0_VARS) $(variant_env d16 $STEPS0_VARS SGLANG_SPEC_KV_ONLY_DEFER_CYCLES=16)"
$B --models $M/kimi16-acc3 $V --bs 1,8 --acc-len 0 --e2e-runs 3 --server-args "$S0_KIMI" \
  --name kimi16-steps0-deferred-kv --budget-s $(left 560) > $L/a1.log 2>&1
say "steps0 deferred kv rc=$?"
grep -h "KV-only rows are written\|Traceback" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | cut -c1-160 | sort | uniq -c | head
python3 - <<'PY'
import glob, json
for f in sorted(glob.glob("/tmp/bench/*/raw/*.jsonl")):
    for line in open(f):
        r = json.loads(line)
        if r.get("type") == "record" and r["metric"] == "cycle_ms":
            print(f.rsplit("/", 1)[1], r["mode"], r["bs"], "cycle_ms", round(r["value"], 3), {k: v for k, v in r["extra"].items() if k.endswith("_ms")})
PY
pack s31a

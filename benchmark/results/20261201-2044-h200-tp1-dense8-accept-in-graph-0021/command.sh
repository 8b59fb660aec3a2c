#!/usr/bin/env bash
# Device calls C and D of 2026-12-01 session 10 (nvidia-h200), from the repository root, slim bundle in .carry/bundle
# (patches 0001-0021, 0021 off by default), scripts carried as .devrun/ (common.sh as in ../20261201-1946-h200-tp1-dense8-fork-diag/command.sh).
# ---- .devrun/s10c.sh (call C, fresh host; its attention sweep: ../20261201-2041-h200-attn-verify-sweep)
# call C (fresh nvidia-h200), bundle with patches 0001-0021 (0021 off by default): the verify-attention sweep
# (issue 18), then 0021 (SGLANG_ENABLE_VERIFY_ACCEPT_IN_GRAPH=1): greedy parity with real acceptance (oracle
# draft, EAGLE-3 vs no speculation in one process) bs 1/8, then fork vs accept at accept 3, bs 1/8/32, round 1.
set -uo pipefail
source .devrun/common.sh
AC="--variant-env accept:SGLANG_ENABLE_VERIFY_ACCEPT_IN_GRAPH=1"
draw dense8 dense --layers 8
timeout 175 python3 benchmark/attn_verify_bench.py --out /tmp/attn --sweep-full --budget-s 140 --no-extend \
  --flashmla-so .carry/flashmla.zip > $L/attn.log 2>&1; say "attn rc=$?"
tail -45 $L/attn.log
tar czf $OUT/attn.tgz -C /tmp attn
$B --models $M/dense8 --variant accept=/tmp/site-fork $AC --bs 1,8 --acc-len 0 --e2e-runs 1 --name s10-accept-parity-real \
  --budget-s $(left 330) > $L/parity-real.log 2>&1; say "parity real rc=$?"
grep -h "greedy_parity\|parity" $BB/*parity-real*/raw/*.jsonl 2>/dev/null | head -4 | cut -c1-300
$B --models $M/dense8 --variant fork=/tmp/site-fork --variant accept=/tmp/site-fork $AC --bs 1,8,32 --acc-len 3 --e2e-runs 3 \
  --name s10-accept-acc3-r1 --budget-s $(left 560) > $L/acc3-r1.log 2>&1; say "acc3 r1 rc=$?"
grep -h "runs without its CUDA graph" $BB/*/logs/*.log 2>/dev/null | cut -c1-200 | sort | uniq -c | head > $L/fallbacks.txt
pack s10c
say end
# ---- .devrun/s10d.sh (call D: the host had been given back, so a fresh one; the accept process timed out starting)
# call D (warm after C): round 2 of fork vs accept at accept 3 (accept first), bs 1/8/32; then the tiny pair's
# GPU parity test of 0021 at TP 1.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
AC="--variant-env accept:SGLANG_ENABLE_VERIFY_ACCEPT_IN_GRAPH=1"
draw dense8 dense --layers 8
$B --models $M/dense8 --variant accept=/tmp/site-fork --variant fork=/tmp/site-fork $AC --bs 1,8 --acc-len 3 --e2e-runs 3 \
  --name s10-accept-acc3-r2 --budget-s $(left 215) > $L/acc3-r2.log 2>&1; say "acc3 r2 rc=$?"
pack s10d
say end

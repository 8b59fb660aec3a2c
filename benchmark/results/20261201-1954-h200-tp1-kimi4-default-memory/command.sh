#!/usr/bin/env bash
# Device call B on nvidia-h200 (2026-12-01 session 10), warm after call A (../20261201-1946-h200-tp1-dense8-fork-diag/command.sh:
# sites installed, Marlin built by warm-jit, kimi4 drawn), from the repository root, the scripts carried as .devrun/.
# ---- .devrun/s10b.sh
# call B (warm after A: sites installed, Marlin cached, kimi4 drawn): kimi4 (384 INT4 experts, MLA, Kimi widths)
# at TP 1 with DEFAULT memory settings (issue 14 item 3: does it start?), real acceptance (greedy parity
# EAGLE-3 vs no speculation) bs 1/8, then accept 3 bs 1/8; then the dense-8 soak (60 s each) if time is left.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
draw kimi4 kimi --layers 4
python3 -m sglang_fastpath doctor --model $M/kimi4 --tp 1 --memory > $OUT/doctor-kimi4.txt 2>&1
$B --models $M/kimi4 --variant fork=/tmp/site-fork --bs 1,8 --acc-len 0 --e2e-runs 1 --name s10-kimi4-tp1-default-mem-real \
  --budget-s $(left 300) > $L/kimi4-real.log 2>&1; say "kimi4 real rc=$?"
grep -h "KV Cache is allocated\|max_total_num_tokens\|mem_fraction_static\|OutOfMemory\|out of memory" $BB/*/logs/*.log | cut -c1-250 | sort | uniq -c | head -20 > $OUT/kimi4-memory-lines.txt
$B --models $M/kimi4 --variant fork=/tmp/site-fork --bs 1,8 --acc-len 3 --e2e-runs 2 --name s10-kimi4-tp1-acc3 \
  --budget-s $(left 470) > $L/kimi4-acc3.log 2>&1; say "kimi4 acc3 rc=$?"
pack s10b
say end

#!/usr/bin/env bash
# Device calls C and D on nvidia-h200 (2026-12-01 session 9), warm host, slim bundle in .carry/bundle
# (patches 0001-0020; 0018 and 0020 then default off). .devrun/common.sh as in
# ../20261201-1118-h200-tp1-dense8-draft-side-in-graph/command.sh.
# ---- .devrun/s9c.sh
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
# call C (warm host): --speculative-adaptive, default vs skip0 (SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1) vs throughput policy + skip0, bs 1..64
source .devrun/common.sh; rm -rf $BB/*
draw_dense8
S0="--variant-env tput:SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1 --variant-env tput:SGLANG_SPEC_ADAPTIVE_POLICY=throughput"
$B --variant adaptive=/tmp/site-fork --variant tput=/tmp/site-fork $S0 --bs 1,8,32,64 --acc-len 3 --e2e-runs 2 --name adaptive-skip0-tput --budget-s $(left 560) --server-args '{"speculative_adaptive": true}' > $OUT/adaptive.log 2>&1; say "adaptive rc=$?"
tail -30 $OUT/adaptive.log
pack s9c
# ---- .devrun/s9d.sh
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
# call D (warm host): why does adaptive at steps 0 (bs 64, accept 1.0) cost ~2x a decode step? profile it
source .devrun/common.sh; rm -rf $BB/*
draw_dense8
$B --variant tput=/tmp/site-fork --variant-env tput:SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1 --variant-env tput:SGLANG_SPEC_ADAPTIVE_POLICY=throughput --bs 32,64 --acc-len 3 --e2e-runs 2 --profile-steps 12 --name adaptive-steps0-profile --budget-s $(left 480) --server-args '{"speculative_adaptive": true}' > $OUT/profile.log 2>&1; say "profile rc=$?"
tail -60 $OUT/profile.log
for d in $BB/*/raw/*; do ls $d | head -20; done
pack s9d
# here, from the traces in raw.tar.gz:
# python3 benchmark/cycle_phases.py $T/e2e_nospec-bs64 $T/e2e_spec-bs64 $T/e2e_nospec-bs32 $T/e2e_spec-bs32 --slow-calls --launches 8 --json cycle-phases.json --png timeline.png

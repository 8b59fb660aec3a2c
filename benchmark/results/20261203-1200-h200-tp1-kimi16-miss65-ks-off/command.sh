# session 22 device call(s) B, C (nvidia-h200, one host: A fresh, B-D warm); slim bundle of commit 6346e77 (patches 0001-0030), built with --jit-cache build/cache/jit/sm90.
# test/gpu/device_bench.sh (committed) defines B, ALL3, BF16, KSET, KOFF, SKIP0, draw and pack.
# ---- .devrun/s22b.sh
# session 22, call B (A's host, warm, but the first kimi process on it compiles its Triton kernels: ~260 s of start-up).
# kimi16 with the draft wrong 65% (accept ~1.4): the K set plus steps 0 (adaptive-ks-off.json), all3 + 0030, steps 0's
# draft extend skipped: does a turned-down state at about a decode step's cost lift bs 1 from 0.93x (K set, session 21)
# to >= 1.0x? Then the host's Triton cache comes back (is it worth seeding, as the Marlin JIT is?).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-miss65 kimi --layers 16 --routed-experts 96 --draft-miss-rate 0.65
K16="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-off.json\", \"mem_fraction_static\": 0.65}"
$B --models $M/kimi16-miss65 --variant all3=/tmp/site-fork $ALL3 $BF16 $SKIP0 --bs 1,8 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 \
  --server-args "$K16" --name kimi16-miss65-koff-skip0 --budget-s $(left 540) > $L/b1.log 2>&1; say "koff skip0 rc=$?"
du -sh ~/.triton/cache 2>/dev/null; ls ~/.triton/cache 2>/dev/null | wc -l
tar czf $OUT/triton-cache.tgz -C ~/.triton cache 2>/dev/null; ls -la $OUT/triton-cache.tgz
pack s22b
# ---- .devrun/s22c.sh
# session 22, call C (B's host, warm). kimi16: (1) the draft wrong 65%, the K set plus steps 0 with steps 0's draft
# extend kept (the turned-down state as it is today, draft KV in step), beside B's skipped one; (2) accept 3, the K set
# with all3 + 0030: greedy parity with 0030 on an MLA/MoE pair, graph memory against session 21's 0.39 GB.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-miss65 kimi --layers 16 --routed-experts 96 --draft-miss-rate 0.65
K16OFF="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks-off.json\", \"mem_fraction_static\": 0.65}"
$B --models $M/kimi16-miss65 --variant all3=/tmp/site-fork $ALL3 $BF16 --bs 1,8 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 \
  --server-args "$K16OFF" --name kimi16-miss65-koff-sync --budget-s $(left 230) > $L/c1.log 2>&1; say "koff sync rc=$?"
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
K16="{\"speculative_adaptive\": true, \"speculative_adaptive_config\": \"$PWD/benchmark/configs/adaptive-ks.json\", \"mem_fraction_static\": 0.65}"
$B --models $M/kimi16-acc3 --variant all3=/tmp/site-fork $ALL3 $BF16 --bs 1,8 --acc-len 0 --e2e-runs 2 --e2e-warmup-len 256 \
  --server-args "$K16" --name kimi16-ks-bf16 --budget-s $(left 470) > $L/c2.log 2>&1; say "ks bf16 rc=$?"
pack s22c

# session 32 device call D (warm after calls A-C; slim bundle of commit 907b485, patches 0001-0040): bash test/gpu/queue/s32c.sh as of that commit
# session 32, call C (warm: kimi16-acc3 drawn; ~330 s). Issue 12's graph memory, the probe session 31 left
# (benchmark/results/20261204-1702-h200-tp1-kimi16-verify-graph-memory/): the start-up line "Capture target verify CUDA
# graph end ... mem usage" read 0.28 GB for stock and 0.74-0.99 GB for the fork (K 4, max bs 64), none of 0021 / 0007 /
# 0017 holding the difference; by the code both allocate ~0.76 GiB there (Triton's attn_logits 537 MB, fp32 logits
# 168 MB, kept aux hidden states 112 MB). If the gap is the caching allocator serving stock's buffers from blocks it
# already held, expandable segments (which let empty_cache return partly used blocks' free pages) bring stock's figure
# up to the fork's. Stock under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, then the fork as it installs, whose
# patch 0040 adds to the same line what the capture kept ("graph pool +X GB, buffers +Y GB", from the allocator's
# snapshot, independent of its cached free memory); expected there: X + Y near 0.76 GiB. bs 64, 64 new tokens, 1 run.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
V="--variant stock=/tmp/site-stock --variant fork=/tmp/site-fork"
V="$V $(variant_env stock PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)"
CAP="{\"mem_fraction_static\": 0.65, \"cuda_graph_max_bs_decode\": 64}"
$B --models $M/kimi16-acc3 $V --bs 64 --acc-len 0 --e2e-runs 1 --output-len 64 --server-args "$CAP" \
  --name kimi16-verify-graph-memory-expandable --budget-s $(left 560) > $L/c1.log 2>&1
say "verify graph memory expandable rc=$?"
for f in $BB/*/logs/e2e-*.log; do echo "== $f"; grep -h "Capture .* CUDA graph end\|max_total_num_tokens" $f | sed 's/^\[[^]]*\] //' | cut -c1-160; done
pack s32c

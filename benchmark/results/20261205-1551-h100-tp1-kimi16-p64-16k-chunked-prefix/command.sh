# session 41 device call 3 (warm host): bash test/gpu/queue/s38a.sh
# session 38, call A: `bash test/gpu/queue/s38a.sh` (~500 s with kimi16-acc3 drawn; on a fresh host the draw and first
# compiles add ~150 s, so give it the call alone). Patch 0048 (SGLANG_ENABLE_TRITON_MLA_CHUNKED_PREFIX), first GPU
# run: kimi16 at --page-size 64 with 16k-token prompts, so that each prompt's second 8k chunk attends to a cached 8k
# prefix. Two variants of the fork in one process: `base` (absorbed MLA over the prefix, as 0.5.17) and `chunk`
# (the switch on: chunked-prefix MHA), bs 1, 32 new tokens, 1 run, plain decode and EAGLE-3 in each. Session 37
# (benchmark/results/20261205-0525-h200-tp1-kimi16-p64-16k-tma-partial/): the second chunk ran at ~2,290 tok/s against
# ~14,180 for the first, 3.6 s of a 4.2-s prefill. Read: `prefill_s` (decode_tokens_per_s's extra) and the
# end-to-end tokens_per_s of each variant; greedy parity EAGLE-3 vs plain decode inside each; the output digests of
# `base` and `chunk` side by side (absorbed MLA and MHA round differently in bf16, so a differing digest is a finding
# to look into, not by itself a failure); the start-up line "Chunked prefix cache is turned on." only in `chunk`.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source test/gpu/device_bench.sh; rm -rf $BB/*
# one layer first (~60 s with compiles): 0.5.17's absorbed MLA against 0048's chunked MHA, 8k new tokens (a long
# prompt's next chunk) and 512 (a short prompt after a radix hit) over 0 (a first chunk: MHA is what 0.5.17 runs
# there) / 2k / 8k / 16k cached, 64 heads (TP 1) and 8
# (TP 8), each checked against a float32 reference before it is timed: where chunked MHA starts to pay, beside
# upstream's threshold (8192 cached tokens)
timeout 150 python3 -m benchmark.tools.mla_prefill_bench --out $OUT/mla-prefill --heads 64,8 --prefix 0,2048,8192,16384 \
  --extend 8192,512 --budget-s 100 > $L/mla-prefill.log 2>&1
say "mla prefill bench rc=$?"; tail -13 $L/mla-prefill.log
draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
P64="{\"page_size\": 64, \"mem_fraction_static\": 0.65}"
V="--variant base=/tmp/site-fork --variant chunk=/tmp/site-fork $(variant_env chunk SGLANG_ENABLE_TRITON_MLA_CHUNKED_PREFIX)"
$B --models $M/kimi16-acc3 $V --bs 1 --prompt-len 16384 --output-len 32 --acc-len 0 --e2e-runs 1 \
  --e2e-warmup-len 16 --server-args "$P64" --name kimi16-p64-16k-chunked-prefix --budget-s $(left 560) \
  > $L/b-chunk.log 2>&1
say "chunked-prefix e2e rc=$?"
grep -h "Chunked prefix cache is turned on" $BB/*/logs/*.log 2>/dev/null | sed 's/^\[[^]]*\] //' | sort | uniq -c | head
grep -h "output_digest\|prefill_s" $BB/*/logs/*.log 2>/dev/null | cut -c1-220 | head -20
summ
pack s38a

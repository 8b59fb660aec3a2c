# session 26 device call A (nvidia-h200, fresh host); slim bundle of commit 0d37f73 (patches 0001-0036), no JIT cache, built by: .venv/bin/sglang-fastpath bundle --out .carry/bundle --profile slim; carry .carry .devrun; test/gpu/device_tree.sh hide/restore around the call
# session 26, call A (fresh nvidia-h200; slim bundle of commit 0d37f73, patches 0001-0036, no JIT cache; carry .carry
# .devrun; device_tree.sh hide before, restore after). Issue 18: GPU tests of patches 0032 (TMA verify attention) and
# 0035 (plain decode through 0007's grouped kernel) as SGLang's installed modules, then the attention bench: 0035's
# grouped-decode beside SGLang's decode kernel, K 4, bs 1/8/32, ctx 1k/8k/32k, H 8/32/64. Meanwhile warm-jit (Marlin
# build, CPU) in the background, and after the bench the kimi16 pairs are drawn, so a warm call B can start at once.
set -uo pipefail
source test/gpu/device_bench.sh; rm -rf $BB/*
(python3 -m sglang_fastpath warm-jit > $L/warm-jit.log 2>&1; echo "warm-jit rc=$?" >> $L/warm-jit.log) &
WJ=$!
timeout 150 python3 -m pytest -q -m gpu test/test_verify_attention_tma.py test/test_grouped_decode.py -p no:cacheprovider \
  > $L/gpu-tests.log 2>&1
say "gpu tests rc=$?"; tail -6 $L/gpu-tests.log
timeout $(left 330) python3 benchmark/tools/attn_verify_bench.py --out $BB/attn --budget-s $(( $(left 330) - 30 )) \
  --no-sweep --no-extend --k 4 --bs 1,8,32 --ctx 1024,8192,32768 --heads 8,32,64 > $L/attn-stdout.log 2>&1
say "attn rc=$?"; tail -45 $L/attn-stdout.log
[ $(left 580) -gt 150 ] && draw kimi16-acc3 kimi --layers 16 --routed-experts 96 --draft-accept-length 3
[ $(left 580) -gt 130 ] && draw kimi16-miss65 kimi --layers 16 --routed-experts 96 --draft-miss-rate 0.65
while kill -0 $WJ 2>/dev/null && [ $(left 580) -gt 20 ]; do sleep 2; done; tail -3 $L/warm-jit.log
cp -r $L $BB/; tar czf $OUT/s26a.tgz -C $BB .
say done

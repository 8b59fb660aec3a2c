# session 16 device call D, nvidia-h200, warm host after call A; slim bundle of commit 20edb74 (patches 0001-0024). .devrun/common.sh as in ../20261202-1139-h200-tp1-0023-parity-graphs-off/command.sh
# session 16, call D (warm): issue 14's soak on dense-8 (accept 3) with its reference run without speculation,
# 64 clients, 5 minutes, EAGLE-3 only (the 150-s reference of session 15 stands beside it), everything in one archive.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh; rm -rf $BB/*
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
python3 -m benchmark.soak --out $BB/soak-dense8 --duration-s 300 --clients 64 \
  --launch "--model-path $M/dense8-acc3/target --speculative-algorithm EAGLE3 --speculative-draft-model-path $M/dense8-acc3/draft \
--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 \
--attention-backend triton --sampling-backend pytorch --grammar-backend none" > $L/soak.log 2>&1
say "soak rc=$?"; tail -12 $L/soak.log
cp -r $L $BB/; tar czf $OUT/s16d.tgz -C $BB .
say end

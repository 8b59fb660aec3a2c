# session 14 device call C2 (nvidia-h200, warm host after calls A, B, B2; .devrun/s14c2.sh, the 90-s cut of s14c.sh). .devrun/common.sh as in ../20261202-0815-h200-tp1-dense8-accept1.5-adaptive-vs-fixed/command.sh
# session 14, call C (warm): patch 0023's GPU parity test, then issue 14's 5-minute soak at 64 clients, dense-8
# (accept 3), TP 1, EAGLE-3 (needs ~560 s: drop the soak to 240 s if less is left).
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
source .devrun/common.sh
# 0023's GPU parity first (tiny pair, 30% misses: output and the walk's predicted acceptance), ~200 s warm
timeout 200 python3 -m pytest -q -p no:cacheprovider test/gpu/test_parity.py -k "rejected_drafts and grouped_draft_extend" \
  > $OUT/parity-grouped-draft-extend.txt 2>&1; say "parity 0023 rc=$?"; tail -3 $OUT/parity-grouped-draft-extend.txt
draw dense8-acc3 dense --layers 8 --draft-accept-length 3
python3 -m benchmark.soak --out $OUT/soak-dense8-eagle3 --duration-s 90 --clients 64 \
  --launch "--model-path $M/dense8-acc3/target --speculative-algorithm EAGLE3 --speculative-draft-model-path $M/dense8-acc3/draft \
--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 \
--attention-backend triton --sampling-backend pytorch --grammar-backend none" > $L/soak-e3.log 2>&1
say "soak eagle3 rc=$?"; tail -30 $L/soak-e3.log
say end

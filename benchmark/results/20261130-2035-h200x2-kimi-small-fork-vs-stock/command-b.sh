# Second call, right after command.sh on the same warm host (sites installed): GPU 1 runs the TP=1
# parity cases that command.sh's first lane lost (its log path pointed into a folder that did not
# exist), GPU 0 runs patch 0007's GPU test (the grouped verify kernel at Kimi MLA shapes).
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1; source test/gpu/device_env.sh; mkdir -p $OUT/logs
( export CUDA_VISIBLE_DEVICES=1; OUT=/tmp/parity1 timeout 230 python3 -m pytest -q -rA -p no:cacheprovider \
    test/gpu/test_parity.py -k "tiny_models-1 or oracle" > $OUT/logs/parity-tp1-gpu1.txt 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=0; OUT=/tmp/parity0 timeout 230 python3 -m pytest -q -rA -p no:cacheprovider \
    test/gpu/test_verify_grouped_attention_gpu.py > $OUT/logs/grouped-gpu0.txt 2>&1 ) &
wait
grep -rh "runs without its CUDA graph\|Triton target verify attention" /tmp/parity1 | sed 's/^.*\] //' | sort | uniq -c
tar -C /tmp -czf $OUT/parity.tgz parity1 parity0

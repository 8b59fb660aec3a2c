# session 14 device call A (nvidia-h200, fresh host; the Marlin warm-up ran at the same time on cores 8-15), first step:
timeout 90 python3 benchmark/graph_launch_cost.py --kernels 256,512,1024 --iters 50 --profiled --cases idle,busy,after_other,many_args --out $OUT/graph-launch-profiled.json > $OUT/graph-launch-profiled.txt 2>&1

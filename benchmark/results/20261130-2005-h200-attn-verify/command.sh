# The device call (nvidia-h200), run from the repository root with .carry/bundle carried (README.md).
source test/gpu/device_env.sh && B=$(( $(left 290) - 25 )); [ $B -lt 40 ] && B=40
python3 benchmark/attn_verify_bench.py --out $OUT --budget-s $B

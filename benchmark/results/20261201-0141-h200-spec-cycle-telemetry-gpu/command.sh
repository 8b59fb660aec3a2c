bash test/gpu/run_on_device.sh test/gpu/test_spec_cycle_stats_gpu.py   # nvidia-h200, slim bundle with 0012, part of .devrun call 4 (2026-12-01 01:41)

#!/usr/bin/env bash
# Both device calls (nvidia-h200, slim bundle in .carry/bundle), from the repository root:
# before 0013 (2026-12-01 01:12, warm host after the MoE call):
bash benchmark/soak/gpu.sh 90
# after 0013 and the soak's process naming (01:28, fresh host, part of .devrun/call3.sh):
bash benchmark/soak/gpu.sh 60

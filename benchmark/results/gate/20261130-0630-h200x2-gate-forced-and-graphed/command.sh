# Run inside benchmark/results/20261130-0637-h200x2-skew-affinity-dense8/command.sh (first step), i.e.:
source test/gpu/device_env.sh  # from the repository root, on nvidia-h200-x2 with the slim bundle in .carry/bundle
GATE_SHARDS=tp2-forced-and-graphed GATE_BUDGET_S=260 bash test/gpu/gate.sh

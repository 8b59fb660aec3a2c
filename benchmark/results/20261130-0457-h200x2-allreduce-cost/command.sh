#!/usr/bin/env bash
# Part of ../20261130-0458-h200x2-gap-dense8-stock-fork/command.sh (the same device call), from the repository root:
python3 benchmark/collective_cost.py --out ar-nvlink.json
NCCL_P2P_DISABLE=1 python3 benchmark/collective_cost.py --out ar-pcie-like.json

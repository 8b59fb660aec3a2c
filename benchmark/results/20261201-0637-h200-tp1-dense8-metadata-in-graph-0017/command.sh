#!/usr/bin/env bash
# Device calls B and C on nvidia-h200 (2026-12-01 session 8), from the repository root, slim bundle
# in .carry/bundle (patches 0001-0017, 0017's switch then default off); warm host from call A.
source test/gpu/device_env.sh
B="python3 benchmark/run.py --profile all --kinds e2e --configs tp1 --backends triton --ks 4 --topks 1 --models $M/dense8 --no-plot"
IG="--variant-env ingraph:SGLANG_ENABLE_TRITON_METADATA_IN_GRAPH=1"
# call B: real acceptance (oracle draft), fork then ingraph; the ingraph process was cut by --budget-s
$B --variant fork=/tmp/site-fork --variant ingraph=/tmp/site-fork $IG --bs 1,8 --acc-len 0 --e2e-runs 1 --name ingraph-parity --budget-s 195
# call B: accept 3, alternating rounds, sampled scheduler profile (results.json, pysample-*.txt)
$B --variant fork=/tmp/site-fork --variant ingraph=/tmp/site-fork $IG --bs 1,8,32 --acc-len 3 --e2e-runs 3 --e2e-repeats 2 --pysample-runs 1 --name ingraph-acc3 --budget-s 475
for d in /tmp/bb/*/raw/*-pysample; do python3 benchmark/pysample.py "$d" --min-pct 2; done
# call C: real acceptance, ingraph alone (results-parity-real-acceptance.json)
$B --variant ingraph=/tmp/site-fork $IG --bs 1,8 --acc-len 0 --e2e-runs 1 --name ingraph-parity-real --budget-s 165
# call C: the GPU parity test (tiny pair passed; the dense pair was cut by the call's time limit)
bash test/gpu/run_on_device.sh test/gpu/test_parity.py -k metadata_filled_in_the_graph

#!/usr/bin/env bash
# Writes .carry/stock-held/sglang/...: the stock 0.5.17 files that benchmark/patches/stock-graph-memory-held.patch
# touches, with it applied here (this machine has git; the device may have neither git nor patch). On the device,
# test/gpu/device_bench.sh's stock_held_site copies them over a copy of the stock site. Run before a device call
# whose script uses stock_held_site (test/gpu/queue/README.md), with .carry carried. Usage: bash test/gpu/stock_held_files.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-.carry/stock-held}
patch=$PWD/benchmark/patches/stock-graph-memory-held.patch
pristine=$("${PYTHON:-.venv/bin/python}" - <<'PY'
import sys
sys.path.insert(0, "test")
from sglang_fastpath.paths import build_dir
from sglang_trees import build_trees
print(build_trees(build_dir() / "cache" / "trees").pristine)
PY
)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
for rel in $(sed -n 's|^diff --git a/python/\(sglang/[^ ]*\) .*|\1|p' "$patch"); do
  mkdir -p "$work/$(dirname "$rel")"; cp "$pristine/python/$rel" "$work/$rel"
done
(cd "$work" && git apply -p2 "$patch")
rm -rf "$out"; mkdir -p "$out"; cp -r "$work/sglang" "$out/"
echo "stock_held_files: $(find "$out" -type f | wc -l) files under $out"

#!/usr/bin/env bash
# Makes the working tree small enough for a device call that carries the slim bundle:
#
#   bash test/gpu/device_tree.sh hide      before the call: the folders below leave git's index and are ignored
#   bash test/gpu/device_tree.sh restore   after it: both undone (safe to run twice)
#
# The device tool copies the tracked and untracked-not-ignored files plus the carried paths, at most
# 64 MiB counted in 4-KiB disk blocks (session 38: the tree and the 60.8-MiB slim bundle with the Marlin JIT
# cache came to 64.95 MiB with only the first three hidden). No queued device script reads what is hidden
# here: benchmark/results (the committed runs, most of the tracked tree), the 0.5.23 port's .patch files
# (the bundle carries the patched wheel; its series file stays, test/sglang_trees.py reads it at import),
# docs, docker, the 0.5.9 backport, patches/README.md and the CPU tests at test/*.py (test/gpu/ stays; a
# call that runs a CPU test file's GPU cases, such as test/test_verify_attention_ws.py, must carry it: add
# it to the call's carry list). Nothing is deleted: the files stay on disk, and
# `restore` puts them back in the index. Between hide and restore the index shows them as deleted: do not
# commit then (hide refuses to start with staged changes for that reason).
set -euo pipefail
cd "$(dirname "$0")/../.."
EXCLUDE=$(git rev-parse --git-path info/exclude)
# gitignore-style patterns (a * stays inside one folder); git takes them as :(glob) pathspecs
HIDDEN=(benchmark/results docs 'patches/upstream/*/*.patch' docker patches/backport patches/README.md 'test/*.py')
case "${1:-}" in
  hide)
    git diff --cached --quiet || { echo "device_tree.sh: staged changes in the index; commit or unstage them first" >&2; exit 1; }
    for d in "${HIDDEN[@]}"; do
      git rm -r -q --cached --ignore-unmatch -- ":(glob)$d"
      grep -qxF "/$d" "$EXCLUDE" 2>/dev/null || echo "/$d" >> "$EXCLUDE"
    done
    echo "device_tree.sh: ${HIDDEN[*]} hidden from the device copy; run 'restore' after the call" ;;
  restore)
    git reset -q -- "${HIDDEN[@]/#/:(glob)}"
    if [ -f "$EXCLUDE" ]; then
      grep -vxF -f <(printf '/%s\n' "${HIDDEN[@]}") "$EXCLUDE" > "$EXCLUDE.tmp" || true
      mv "$EXCLUDE.tmp" "$EXCLUDE"
    fi
    echo "device_tree.sh: ${HIDDEN[*]} back in the index" ;;
  *) echo "usage: bash test/gpu/device_tree.sh hide|restore" >&2; exit 2 ;;
esac

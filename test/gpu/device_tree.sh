#!/usr/bin/env bash
# Makes the working tree small enough for a device call that carries the slim bundle:
#
#   bash test/gpu/device_tree.sh hide      before the call: benchmark/results leaves git's index and is ignored
#   bash test/gpu/device_tree.sh restore   after it: both undone (safe to run twice)
#
# The device tool copies the tracked and untracked-not-ignored files plus the carried paths, at most
# 64 MiB; the slim bundle is 58 MiB and benchmark/results (the committed runs, which no device script
# reads) is most of the tracked tree. Nothing is deleted: the files stay on disk, and `restore` puts them
# back in the index. Between hide and restore the index shows benchmark/results as deleted: do not
# commit then (hide refuses to start with staged changes for that reason).
set -euo pipefail
cd "$(dirname "$0")/../.."
EXCLUDE=$(git rev-parse --git-path info/exclude)
LINE=/benchmark/results/
case "${1:-}" in
  hide)
    git diff --cached --quiet || { echo "device_tree.sh: staged changes in the index; commit or unstage them first" >&2; exit 1; }
    git rm -r -q --cached benchmark/results
    grep -qxF "$LINE" "$EXCLUDE" 2>/dev/null || echo "$LINE" >> "$EXCLUDE"
    echo "device_tree.sh: benchmark/results hidden from the device copy; run 'restore' after the call" ;;
  restore)
    git reset -q -- benchmark/results
    if [ -f "$EXCLUDE" ]; then grep -vxF "$LINE" "$EXCLUDE" > "$EXCLUDE.tmp" || true; mv "$EXCLUDE.tmp" "$EXCLUDE"; fi
    echo "device_tree.sh: benchmark/results back in the index" ;;
  *) echo "usage: bash test/gpu/device_tree.sh hide|restore" >&2; exit 2 ;;
esac

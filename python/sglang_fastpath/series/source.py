"""``sglang-fastpath source``: the editable SGLang tree, pristine plus the series as commits."""

from __future__ import annotations

from pathlib import Path

from sglang_fastpath.errors import FastpathError
from sglang_fastpath.fetch import fetch_pinned
from sglang_fastpath.paths import source_tree
from sglang_fastpath.series import git
from sglang_fastpath.series.patches import read_series
from sglang_fastpath.series.sets import find_set
from sglang_fastpath.series.tree import build_tree


def make_source(dest: Path | None = None, force: bool = False, series: str = "series") -> Path:
    """(Re)create the tree of ``series`` (``series``, ``upstream/v0.5.23``...) on its pinned release;
    refuses to discard uncommitted edits unless ``force``."""
    dest = dest or source_tree()
    if (dest / ".git").is_dir() and git.is_dirty(dest) and not force:
        raise FastpathError(
            f"{dest} has uncommitted edits: commit and 'sglang-fastpath export' them, or pass --force to discard"
        )
    series_set = find_set(series)
    build_tree(fetch_pinned(series_set.version), read_series(series_set.directory), dest)
    return dest

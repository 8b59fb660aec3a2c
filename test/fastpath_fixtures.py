"""Helpers shared by the CPU tests of the series tools: a throw-away project root."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def make_project(tmp: Path, with_patches: bool = False) -> Path:
    """A project root under ``tmp`` with a patches/series (empty, or a copy of the repo's)."""
    root = tmp / "project"
    (root / "patches").mkdir(parents=True)
    if with_patches:
        shutil.copytree(REPO / "patches", root / "patches", dirs_exist_ok=True)
    else:
        (root / "patches" / "series").write_text("# test series\n")
    return root

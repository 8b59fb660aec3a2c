"""Where things live: the repository root, patches/, build/ and the wheel cache."""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The checkout holding ``patches/``: $SGLANG_FASTPATH_ROOT, else found upwards from here or cwd."""
    env = os.environ.get("SGLANG_FASTPATH_ROOT")
    if env:
        return Path(env).resolve()
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for candidate in (start, *start.parents):
            if (candidate / "patches" / "series").is_file():
                return candidate
    return Path.cwd()


def patches_dir(root: Path | None = None) -> Path:
    return (root or repo_root()) / "patches"


def build_dir(root: Path | None = None) -> Path:
    return (root or repo_root()) / "build"


def source_tree(root: Path | None = None) -> Path:
    """The git working tree where SGLang is edited (``sglang-fastpath source``)."""
    return build_dir(root) / "sglang"


def wheel_cache(root: Path | None = None) -> Path:
    env = os.environ.get("SGLANG_FASTPATH_WHEEL_CACHE")
    return Path(env) if env else build_dir(root) / "cache" / "wheels"

"""Every patch series in ``patches/``, each with the SGLang release it is pinned to.

* ``patches/series``: the main series, on ``pins.BASE_VERSION`` (what the fork ships);
* ``patches/backport/v<version>/series``: a fix for an older release;
* ``patches/upstream/v<version>/series``: the series ported to a newer release, one upstream
  pull request per patch, its text in ``NNNN.md`` next to the patch.

The folder name carries the version; each version needs a pin in ``pins.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sglang_fastpath.errors import FastpathError
from sglang_fastpath.paths import patches_dir
from sglang_fastpath.pins import BASE_VERSION
from sglang_fastpath.series.patches import SERIES_FILE

MAIN, BACKPORT, UPSTREAM = "main", "backport", "upstream"


@dataclass(frozen=True)
class SeriesSet:
    kind: str  # MAIN, BACKPORT or UPSTREAM
    version: str  # the SGLang release it applies to
    directory: Path

    @property
    def label(self) -> str:
        """``series`` for the main series, else ``backport/v0.5.9``, ``upstream/v0.5.23``."""
        return "series" if self.kind == MAIN else f"{self.kind}/v{self.version}"


def version_key(version: str) -> tuple[int, ...]:
    """``0.5.15.post1`` -> (0, 5, 15, 1): orders releases and their post releases."""
    numbers = [int(n) for n in re.findall(r"\d+", version)]
    return tuple(numbers)


def _folders(root: Path, kind: str) -> list[SeriesSet]:
    base = root / kind
    if not base.is_dir():
        return []
    found = [
        SeriesSet(kind, folder.name[1:], folder)
        for folder in base.glob("v*")
        if (folder / SERIES_FILE).is_file()
    ]
    return sorted(found, key=lambda s: version_key(s.version))


def series_sets(root: Path | None = None) -> list[SeriesSet]:
    """The main series, then the backports and the upstream ports, oldest release first."""
    patches = patches_dir(root)
    return [SeriesSet(MAIN, BASE_VERSION, patches), *_folders(patches, BACKPORT), *_folders(patches, UPSTREAM)]


def upstream_sets(root: Path | None = None) -> list[SeriesSet]:
    return _folders(patches_dir(root), UPSTREAM)


def find_set(label: str | None, root: Path | None = None) -> SeriesSet:
    """The set named ``label`` (``series``, ``upstream/v0.5.23``...); None: the newest upstream port."""
    sets = series_sets(root)
    if label is None:
        ups = [s for s in sets if s.kind == UPSTREAM]
        if not ups:
            raise FastpathError(f"no upstream series under {patches_dir(root) / UPSTREAM}")
        return ups[-1]
    wanted = label.strip("/")
    for s in sets:
        if s.label == wanted:
            return s
    raise FastpathError(f"no series '{label}'; there are: {', '.join(s.label for s in sets)}")

"""The ordered patch series: ``patches/series`` names the patches, one per line.

Blank lines group patches and ``#`` starts a comment; the order of the file alone
sets the order of application. A backport series for another base lives in its own
folder with its own ``series`` (``patches/backport/v0.5.9/series``).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path

from sglang_fastpath.errors import FastpathError

SERIES_FILE = "series"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class Hunk:
    path: str  # upstream path, e.g. python/sglang/srt/server_args.py
    index: int  # 1-based within its file
    old_start: int
    header: str


@dataclass(frozen=True)
class Series:
    directory: Path
    patches: tuple[Path, ...]

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.patches]


def read_series(directory: Path) -> Series:
    """Parse ``directory/series``; every listed patch must exist."""
    series_file = directory / SERIES_FILE
    if not series_file.is_file():
        raise FastpathError(f"no series file at {series_file}; create it (one patch file name per line)")
    patches: list[Path] = []
    for lineno, raw in enumerate(series_file.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        path = directory / line
        if not path.is_file():
            raise FastpathError(f"{series_file}:{lineno}: {line} is listed but does not exist")
        if path in patches:
            raise FastpathError(f"{series_file}:{lineno}: {line} is listed twice")
        patches.append(path)
    return Series(directory, tuple(patches))


def unlisted_patches(series: Series) -> list[Path]:
    """Patch files in the series folder that the series does not name (stale exports)."""
    listed = set(series.patches)
    return sorted(p for p in series.directory.glob("*.patch") if p not in listed)


def hunks(patch: Path) -> list[Hunk]:
    """Every hunk of a unified diff, with the file it belongs to."""
    result: list[Hunk] = []
    path = ""
    index = 0
    for line in patch.read_text(errors="replace").splitlines():
        if line.startswith("diff --git "):
            path = line.split(" b/", 1)[-1]
            index = 0
        elif line.startswith("@@ "):
            match = _HUNK.match(line)
            if match and path:
                index += 1
                result.append(Hunk(path, index, int(match.group(1)), line))
    return result


def subject(patch: Path) -> str:
    """The commit title: the ``Subject:`` header with its folded continuation lines joined."""
    lines = patch.read_text(errors="replace").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Subject: "):
            parts = [line[len("Subject: "):]]
            parts += [rest.strip() for rest in itertools.takewhile(lambda x: x[:1] in (" ", "\t"), lines[i + 1:])]
            return re.sub(r"^\[PATCH[^\]]*\]\s*", "", " ".join(parts))
    return ""

"""``sglang-fastpath export``: write the tree's commits back into ``patches/``.

Deterministic: the commit hash is zeroed, the signature dropped, the abbreviation
length and the identity fixed, and numbering left out of the subject, so exporting
an unchanged tree rewrites every patch byte for byte.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from sglang_fastpath.errors import FastpathError
from sglang_fastpath.paths import patches_dir, source_tree
from sglang_fastpath.series import git
from sglang_fastpath.series.patches import SERIES_FILE
from sglang_fastpath.series.tree import PRISTINE_TAG

FORMAT_PATCH_ARGS = ("format-patch", "--zero-commit", "--no-signature", "-N", "--no-renames", "--stat=80")


@dataclass(frozen=True)
class ExportResult:
    written: list[str]
    changed: list[str]
    removed: list[str]


def _series_header(series_file: Path) -> list[str]:
    """The leading comment block of the current series file, kept across exports."""
    if not series_file.is_file():
        return []
    header = []
    for line in series_file.read_text().splitlines():
        if line.startswith("#") or (not line.strip() and header):
            header.append(line)
        else:
            break
    while header and not header[-1].strip():
        header.pop()
    return header


def export_series(repo: Path | None = None, dest: Path | None = None) -> ExportResult:
    repo = repo or source_tree()
    dest = dest or patches_dir()
    if not (repo / ".git").is_dir():
        raise FastpathError(f"{repo} is not a source tree: run 'sglang-fastpath source' first")
    if git.is_dirty(repo):
        raise FastpathError(f"{repo} has uncommitted edits: commit them there, then export")
    with tempfile.TemporaryDirectory() as tmp:
        git.git(repo, *FORMAT_PATCH_ARGS, "-o", tmp, f"{PRISTINE_TAG}..HEAD")
        produced = sorted(Path(tmp).glob("*.patch"))
        dest.mkdir(parents=True, exist_ok=True)
        changed = []
        for patch in produced:
            target = dest / patch.name
            data = patch.read_bytes()
            if not target.exists() or target.read_bytes() != data:
                target.write_bytes(data)
                changed.append(patch.name)
    names = [p.name for p in produced]
    removed = []
    for stale in sorted(dest.glob("[0-9][0-9][0-9][0-9]-*.patch")):
        if stale.name not in names:
            stale.unlink()
            removed.append(stale.name)
    series_file = dest / SERIES_FILE
    header = _series_header(series_file)
    text = "\n".join([*header, *([""] if header else []), *names]) + "\n"
    if not series_file.is_file() or series_file.read_text() != text:
        series_file.write_text(text)
    return ExportResult(names, changed, removed)

"""``sglang-fastpath check``: does the series apply, cleanly, to its pristine base?

Each patch is checked with ``git apply --check`` on a fresh pristine tree (exact
context, no fuzz) and then committed with ``git am`` before the next one. On the
pinned base any failure, or a hunk that only applies at an offset, is an error
naming the patch, the file and the hunk. Against another release (``--base``) the
same report is printed for information: the first step of a rebase.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sglang_fastpath import git
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.fetch import fetch_pinned, fetch_release, verify_wheel, wheel_version
from sglang_fastpath.paths import patches_dir
from sglang_fastpath.pins import BASE_VERSION, find_pin
from sglang_fastpath.series import Series, hunks, read_series, subject, unlisted_patches
from sglang_fastpath.tree import unpack_pristine

_FAILED = re.compile(r"^error: patch failed: (?P<path>.+):(?P<line>\d+)$", re.MULTILINE)
_MISSING = re.compile(r"^error: (?P<path>\S+): (?:No such file or directory|does not exist in index)$", re.MULTILINE)
_OFFSET = re.compile(r"^Hunk #(?P<hunk>\d+) succeeded at (?P<at>\d+) \(offset (?P<off>-?\d+) lines?\)", re.MULTILINE)
BACKPORT_DIR = "backport"


@dataclass
class PatchResult:
    name: str
    applied: bool
    problems: list[str] = field(default_factory=list)  # each one line: file, hunk, what happened
    notes: list[str] = field(default_factory=list)


@dataclass
class CheckReport:
    base: str
    series_dir: Path
    results: list[PatchResult]
    lint: list[str]

    @property
    def ok(self) -> bool:
        return not self.lint and all(r.applied and not r.problems for r in self.results)


def _describe_failure(patch: Path, output: str) -> list[str]:
    problems = []
    for match in _FAILED.finditer(output):
        path, line = match.group("path"), int(match.group("line"))
        hunk = next((h for h in hunks(patch) if h.path == path and h.old_start == line), None)
        where = f"hunk #{hunk.index} {hunk.header}" if hunk else f"hunk at line {line}"
        problems.append(f"{patch.name}: {path}: {where} does not apply")
    for match in _MISSING.finditer(output):
        problems.append(f"{patch.name}: {match.group('path')}: file is missing in the base")
    if not problems:
        first = (output.strip().splitlines() or ["git apply failed"])[0]
        problems.append(f"{patch.name}: {first}")
    return problems


def _lint(series: Series) -> list[str]:
    problems = [f"{p.name}: in {series.directory} but not listed in series" for p in unlisted_patches(series)]
    for patch in series.patches:
        text = patch.read_text(errors="replace")
        if not subject(patch):
            problems.append(f"{patch.name}: no 'Subject:' header (not git format-patch output)")
        body = text.split("\n\n", 1)[-1].split("\n---\n", 1)[0].strip()
        if not body:
            problems.append(f"{patch.name}: empty commit message body (state problem, fix and evidence)")
    return problems


def check_series_on(wheel: Path, series: Series, strict: bool) -> CheckReport:
    results: list[PatchResult] = []
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "sglang"
        unpack_pristine(wheel, repo)
        for patch in series.patches:
            result = PatchResult(patch.name, applied=False)
            probe = git.git(repo, "apply", "--check", "-v", str(patch.resolve()), check=False)
            output = probe.stdout + probe.stderr
            if probe.returncode != 0:
                result.problems = _describe_failure(patch, output)
            else:
                for m in _OFFSET.finditer(output):
                    msg = f"{patch.name}: hunk #{m.group('hunk')} applies at line {m.group('at')} (offset {m.group('off')})"
                    (result.problems if strict else result.notes).append(msg)
                applied = git.am(repo, patch)
                if applied.returncode != 0:
                    git.git(repo, "am", "--abort", check=False)
                    result.problems.append(f"{patch.name}: git am failed: {applied.stderr.strip()[:200]}")
                else:
                    result.applied = True
            results.append(result)
    return CheckReport(wheel_version(wheel), series.directory, results, _lint(series))


def backport_dirs(root: Path | None = None) -> list[Path]:
    base = (root or patches_dir()) / BACKPORT_DIR
    return sorted(p for p in base.glob("v*") if (p / "series").is_file()) if base.is_dir() else []


def check_pinned(wheel: Path | None = None) -> list[CheckReport]:
    """The main series on the pinned base, and each backport on its own pinned base."""
    if wheel is not None:
        pin = find_pin(BASE_VERSION)
        assert pin is not None
        verify_wheel(wheel, pin)
    reports = [check_series_on(wheel or fetch_pinned(BASE_VERSION), read_series(patches_dir()), strict=True)]
    for folder in backport_dirs():
        version = folder.name.lstrip("v")
        if find_pin(version) is None:
            raise FastpathError(f"backport folder {folder} names sglang {version}, which has no pin in pins.py")
        reports.append(check_series_on(fetch_pinned(version), read_series(folder), strict=True))
    return reports


def check_other_base(version: str | None) -> CheckReport:
    """How the main series applies to another release (default: the newest); never fails."""
    wheel = fetch_release(version)
    return check_series_on(wheel, read_series(patches_dir()), strict=False)


def format_report(report: CheckReport) -> str:
    lines = [f"sglang {report.base} + {report.series_dir.name}/series ({len(report.results)} patches)"]
    for r in report.results:
        state = "ok" if r.applied and not r.problems else ("applies with offsets" if r.applied else "FAILS")
        lines.append(f"  {state:>20}  {r.name}")
        lines += [f"{'':24}{p}" for p in r.problems + r.notes]
    lines += [f"  {'lint':>20}  {p}" for p in report.lint]
    return "\n".join(lines)

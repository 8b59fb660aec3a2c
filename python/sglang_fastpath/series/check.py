"""``sglang-fastpath check``: does every series apply, cleanly, to its own pinned base?

Each series (``series_sets``: the main one on 0.5.17, each backport and each upstream port on
its release) is checked on a fresh pristine tree of its own sha256-pinned wheel (just the files
the series touches, which is all ``git apply`` reads): every patch with ``git apply --check``
(exact context, no fuzz), then committed with ``git am`` before the next one. Any failure, or a hunk that only applies at an offset, is an error naming the patch,
the file and the hunk; an upstream series must also carry its pull-request texts. ``check_bases``
is the report-only view across releases: which patch of which series applies to which release.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sglang_fastpath.errors import FastpathError
from sglang_fastpath.fetch import fetch_pinned, fetch_release, released_versions, verify_wheel, wheel_version
from sglang_fastpath.pins import find_pin
from sglang_fastpath.series import git, pull_request
from sglang_fastpath.series.patches import Series, hunks, read_series, subject, unlisted_patches
from sglang_fastpath.series.sets import BACKPORT, MAIN, UPSTREAM, SeriesSet, series_sets, version_key
from sglang_fastpath.series.tree import PRISTINE_TAG, unpack_pristine

_FAILED = re.compile(r"^error: patch failed: (?P<path>.+):(?P<line>\d+)$", re.MULTILINE)
_MISSING = re.compile(r"^error: (?P<path>\S+): (?:No such file or directory|does not exist in index)$", re.MULTILINE)
_OFFSET = re.compile(r"^Hunk #(?P<hunk>\d+) succeeded at (?P<at>\d+) \(offset (?P<off>-?\d+) lines?\)", re.MULTILINE)


@dataclass
class PatchResult:
    name: str
    applied: bool
    problems: list[str] = field(default_factory=list)  # each one line: file, hunk, what happened
    notes: list[str] = field(default_factory=list)

    @property
    def state(self) -> str:
        """``ok``, ``offset`` (applies, but only at an offset) or ``FAILS``."""
        if not self.applied:
            return "FAILS"
        return "ok" if not self.problems and not self.notes else "offset"


@dataclass
class CheckReport:
    base: str
    label: str  # the series: "series", "backport/v0.5.9", "upstream/v0.5.23"
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


def touched_paths(series: Series) -> set[str]:
    """Every upstream path a patch of ``series`` reads or writes: all a check needs unpacked."""
    paths = set()
    for patch in series.patches:
        for line in patch.read_text(errors="replace").splitlines():
            if line.startswith("diff --git a/"):
                old, _, new = line[len("diff --git a/"):].partition(" b/")
                paths |= {old, new}
    return paths


def apply_in(repo: Path, series: Series, strict: bool) -> list[PatchResult]:
    """Reset ``repo`` to its pristine tag, then try each patch in order; one that fails is skipped."""
    git.git(repo, "reset", "-q", "--hard", PRISTINE_TAG)
    results: list[PatchResult] = []
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
    return results


def check_set(series_set: SeriesSet, wheel: Path | None = None) -> CheckReport:
    """One series on a fresh tree of its own pinned wheel (``wheel``: that file, verified)."""
    pin = find_pin(series_set.version)
    if pin is None:
        raise FastpathError(f"{series_set.label} names sglang {series_set.version}, which has no pin in pins.py")
    wheel = verify_wheel(wheel, pin) if wheel is not None else fetch_pinned(series_set.version)
    series = read_series(series_set.directory)
    lint = _lint(series) + (pull_request.lint(series_set) if series_set.kind == UPSTREAM else [])
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "sglang"
        unpack_pristine(wheel, repo, only=touched_paths(series))
        results = apply_in(repo, series, strict=True)
    return CheckReport(wheel_version(wheel), series_set.label, results, lint)


def check_pinned(wheel: Path | None = None) -> list[CheckReport]:
    """Every series on its own pinned base; ``wheel`` replaces the download for the main series."""
    return [check_set(s, wheel if s.kind == MAIN else None) for s in series_sets()]


def format_report(report: CheckReport) -> str:
    lines = [f"sglang {report.base} + {report.label} ({len(report.results)} patches)"]
    for r in report.results:
        state = "ok" if r.applied and not r.problems else ("applies with offsets" if r.applied else "FAILS")
        lines.append(f"  {state:>20}  {r.name}")
        lines += [f"{'':24}{p}" for p in r.problems + r.notes]
    lines += [f"  {'lint':>20}  {p}" for p in report.lint]
    return "\n".join(lines)


# -- report only: which patch applies to which release ---------------------


@dataclass
class BaseMatrix:
    versions: list[str]
    # (series label, patch name) -> {version: "ok" | "offset" | "FAILS"}
    cells: dict[tuple[str, str], dict[str, str]]


def _release_wheel(version: str) -> Path:
    """The pinned wheel where there is a pin (verified), else the release as the index has it."""
    return fetch_pinned(version) if find_pin(version) is not None else fetch_release(version)


def default_base_versions() -> list[str]:
    """Every release on the index from the oldest pinned base a series targets here on."""
    oldest = min((s.version for s in series_sets() if s.kind != BACKPORT), key=version_key)
    return [v for v in released_versions() if version_key(v) >= version_key(oldest)]


def check_bases(versions: list[str], sets: list[SeriesSet] | None = None) -> BaseMatrix:
    """Apply every series to each release (patches in order; one that fails is skipped)."""
    sets = sets if sets is not None else [s for s in series_sets() if s.kind != BACKPORT]
    versions = sorted(dict.fromkeys(versions), key=version_key)
    series = {s.label: read_series(s.directory) for s in sets}  # read once: the folders may change meanwhile
    matrix = BaseMatrix(versions, {(label, name): {} for label, ser in series.items() for name in ser.names})
    paths = set().union(*(touched_paths(ser) for ser in series.values()))
    for version in versions:
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp) / "sglang"
            unpack_pristine(_release_wheel(version), repo, only=paths)
            for label, ser in series.items():
                for result in apply_in(repo, ser, strict=False):
                    matrix.cells[(label, result.name)][version] = result.state
    return matrix


def format_matrix(matrix: BaseMatrix) -> str:
    """A markdown table: one row per patch of each series, one column per release."""
    head = ["series", "patch", *matrix.versions]
    rows = [head, ["---"] * len(head)]
    for (label, name), states in matrix.cells.items():
        number = name.split("-", 1)[0]
        rows.append([label, number, *(states.get(v, "") for v in matrix.versions)])
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


NOT_PORTED_FILE = "not-ported"  # in an upstream folder: "<slug of a main-series patch> <why no port is needed>"


def slug(patch_name: str) -> str:
    """``0004-Reject-out-of-vocabulary.patch`` -> ``Reject-out-of-vocabulary`` (survives renumbering)."""
    return patch_name.split("-", 1)[-1].removesuffix(".patch")


def not_ported_reasons(upstream: SeriesSet) -> dict[str, str]:
    """The main-series patches (by slug) that ``upstream`` states need no port, with the reason."""
    path = upstream.directory / NOT_PORTED_FILE
    reasons = {}
    if path.is_file():
        for raw in path.read_text().splitlines():
            line = raw.split("#", 1)[0].strip()
            if line:
                key, _, reason = line.partition(" ")
                reasons[key] = reason.strip()
    return reasons


def missing_upstream_counterparts(upstream: SeriesSet) -> list[str]:
    """Main-series patches with neither a port in ``upstream`` (same slug) nor a written reason."""
    ported = {slug(p.name) for p in read_series(upstream.directory).patches}
    reasons = not_ported_reasons(upstream)
    main = next(s for s in series_sets() if s.kind == MAIN)
    return [
        p.name
        for p in read_series(main.directory).patches
        if slug(p.name) not in ported and not reasons.get(slug(p.name))
    ]

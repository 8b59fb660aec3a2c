"""One upstream pull request per patch of an upstream series (``sglang-fastpath pr NNNN``).

Each ``NNNN-*.patch`` of ``patches/upstream/v<release>/`` has its pull-request text in
``NNNN.md`` beside it, in SGLang's template (the headings of ``TEMPLATE_HEADINGS``, in order).
The title is the patch's ``Subject``. A patch that only applies on top of an earlier one of its
series says so in its text with ``<!-- depends-on: 0001 -->``; its branch then carries that
patch first (a stacked pull request).

``write_branch`` makes the branch: on a clone of SGLang's repository it starts from the
release tag ``v<release>`` (ready to push); without one it starts from a tree unpacked from
the pinned wheel (tag ``pristine``), which holds the same files but not upstream's history.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sglang_fastpath.digest import sha256_of
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.fetch import fetch_pinned
from sglang_fastpath.paths import build_dir
from sglang_fastpath.series import git
from sglang_fastpath.series.patches import read_series, subject
from sglang_fastpath.series.sets import SeriesSet
from sglang_fastpath.series.tree import PRISTINE_TAG, unpack_pristine

TEMPLATE_HEADINGS = (
    "## Motivation",
    "## Modifications",
    "## Accuracy Tests",
    "## Benchmarking and Profiling",
    "## Checklist",
)
_DEPENDS = re.compile(r"<!--\s*depends-on:\s*([0-9 ,]+?)\s*-->")
BRANCH_PREFIX = "fastpath/"


@dataclass(frozen=True)
class PullRequest:
    number: str  # "0001"
    patch: Path
    text_file: Path
    title: str
    body: str
    depends_on: tuple[str, ...]

    @property
    def branch(self) -> str:
        return f"{BRANCH_PREFIX}{self.patch.stem}"

    def render(self) -> str:
        """Title line, blank line, body: what ``pr`` prints."""
        return f"{self.title}\n\n{self.body.strip()}\n"


def _number(patch: Path) -> str:
    return patch.name.split("-", 1)[0]


def text_file(patch: Path) -> Path:
    return patch.with_name(f"{_number(patch)}.md")


def load(series_set: SeriesSet, number: str) -> PullRequest:
    """The pull request of patch ``number`` (``1`` or ``0001``) of ``series_set``."""
    wanted = f"{int(number):04d}" if number.isdigit() else number
    patches = {_number(p): p for p in read_series(series_set.directory).patches}
    if wanted not in patches:
        raise FastpathError(
            f"{series_set.label} has no patch {wanted}; it has {', '.join(sorted(patches)) or 'none'}"
        )
    patch = patches[wanted]
    md = text_file(patch)
    if not md.is_file():
        raise FastpathError(f"{patch.name} has no pull-request text: write {md}")
    body = md.read_text()
    depends = tuple(
        f"{int(n):04d}" for m in _DEPENDS.finditer(body) for n in re.split(r"[ ,]+", m.group(1)) if n
    )
    missing = [n for n in depends if n not in patches]
    if missing:
        raise FastpathError(f"{md.name} depends on {', '.join(missing)}, which {series_set.label} does not have")
    return PullRequest(wanted, patch, md, subject(patch), body, depends)


def lint(series_set: SeriesSet) -> list[str]:
    """Problems with the pull-request texts of an upstream series (empty: none)."""
    problems = []
    listed = read_series(series_set.directory).patches
    for patch in listed:
        try:
            pr = load(series_set, _number(patch))
        except FastpathError as exc:
            problems.append(str(exc))
            continue
        positions = [pr.body.find(h + "\n") for h in TEMPLATE_HEADINGS]
        absent = [h for h, at in zip(TEMPLATE_HEADINGS, positions) if at < 0]
        if absent:
            problems.append(f"{pr.text_file.name}: missing template heading(s) {', '.join(absent)}")
        elif positions != sorted(positions):
            problems.append(f"{pr.text_file.name}: template headings out of order (want {' / '.join(TEMPLATE_HEADINGS)})")
    numbers = {_number(p) for p in listed}
    for md in sorted(series_set.directory.glob("[0-9][0-9][0-9][0-9].md")):
        if md.stem not in numbers:
            problems.append(f"{md.name}: no patch {md.stem} in {series_set.label}/series")
    return problems


@dataclass(frozen=True)
class Branch:
    repo: Path
    name: str
    base: str  # the tag the branch starts from
    patches: tuple[str, ...]  # applied, in order
    pushable: bool  # True on a clone of upstream (history shared with SGLang's repository)


def _pristine_matches(repo: Path, wheel: Path) -> bool:
    if not (repo / ".git").is_dir():
        return False
    proc = git.git(repo, "log", "-1", "--format=%B", PRISTINE_TAG, check=False)
    return proc.returncode == 0 and f"sha256 {sha256_of(wheel)}" in proc.stdout


def default_tree(series_set: SeriesSet, root: Path | None = None) -> Path:
    return build_dir(root) / f"sglang-pr-v{series_set.version}"


def write_branch(pr: PullRequest, series_set: SeriesSet, dest: Path | None = None,
                 upstream_repo: Path | None = None) -> Branch:
    """Create (or reset) ``pr.branch`` at the base with the PR's patches applied as commits."""
    if upstream_repo is not None:
        repo, base, pushable = upstream_repo, f"v{series_set.version}", True
        if git.git(repo, "rev-parse", "--verify", "-q", f"{base}^{{commit}}", check=False).returncode != 0:
            raise FastpathError(f"{repo} has no tag {base}: fetch SGLang's tags there (git fetch --tags)")
    else:
        repo, base, pushable = dest or default_tree(series_set), PRISTINE_TAG, False
        wheel = fetch_pinned(series_set.version)
        if not _pristine_matches(repo, wheel):
            if repo.exists() and any(repo.iterdir()):
                raise FastpathError(
                    f"{repo} is not a tree of {wheel.name} (its 'pristine' tag differs): "
                    "pick another --dest, or delete it to let pr create it"
                )
            unpack_pristine(wheel, repo)
    if git.is_dirty(repo):
        raise FastpathError(f"{repo} has uncommitted edits: commit or discard them first")
    git.git(repo, "checkout", "-q", "-B", pr.branch, base)
    names = {_number(p): p for p in read_series(series_set.directory).patches}
    applied = []
    for number in (*pr.depends_on, pr.number):
        proc = git.am(repo, names[number])
        if proc.returncode != 0:
            git.git(repo, "am", "--abort", check=False)
            detail = (proc.stderr.strip() or proc.stdout.strip() or "git am failed").splitlines()[0]
            raise FastpathError(f"{names[number].name} does not apply to {base} in {repo}: {detail}")
        applied.append(names[number].name)
    return Branch(repo, pr.branch, base, tuple(applied), pushable)

"""The series sets (main, backport, upstream port), their checks, the release table and ``pr``.

Runs on the pinned wheels (0.5.17, 0.5.9, 0.5.23), downloaded once into build/cache/wheels.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fastpath_fixtures import REPO, make_project

from sglang_fastpath import fetch
from sglang_fastpath.series import git, pull_request
from sglang_fastpath.series.check import (
    check_bases,
    check_pinned,
    check_set,
    default_base_versions,
    format_matrix,
    missing_upstream_counterparts,
    not_ported_reasons,
    slug,
)
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.series.export import export_series
from sglang_fastpath.pins import BASE_VERSION, find_pin
from sglang_fastpath.series.patches import read_series, subject
from sglang_fastpath.series.sets import find_set, series_sets, upstream_sets, version_key
from sglang_fastpath.series.source import make_source
from sglang_fastpath.series.tree import PRISTINE_TAG

UPSTREAM = find_set(None, REPO)


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the repository's patches/ (every series), with the shared wheel cache."""
    root = make_project(tmp_path, with_patches=True)
    monkeypatch.setenv("SGLANG_FASTPATH_ROOT", str(root))
    monkeypatch.setenv("SGLANG_FASTPATH_WHEEL_CACHE", str(REPO / "build" / "cache" / "wheels"))
    return root


def _set(label: str):
    return find_set(label)


def test_every_series_has_a_pinned_release(project: Path) -> None:
    sets = series_sets()
    assert [s.label for s in sets][:1] == ["series"] and sets[0].version == BASE_VERSION
    assert {s.kind for s in sets} == {"main", "backport", "upstream"}
    for s in sets:
        assert find_pin(s.version) is not None, f"{s.label}: no pin for sglang {s.version}"
    assert find_set(None).label == UPSTREAM.label, "the default upstream series is the newest"
    assert version_key("0.5.15.post1") > version_key("0.5.15") and version_key("0.5.23") > version_key("0.5.9")


def test_release_list_comes_from_pip_index_newest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    out = "sglang (0.5.23)\nAvailable versions: 0.5.23, 0.5.22, 0.5.15.post1, 0.5.15, 0.5.9\n"
    monkeypatch.setattr(fetch.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, out, ""))
    assert fetch.released_versions() == ["0.5.23", "0.5.22", "0.5.15.post1", "0.5.15", "0.5.9"]
    assert fetch.newest_release() == "0.5.23"
    assert default_base_versions() == ["0.5.23", "0.5.22"], "from the main series' base (0.5.17) on"
    monkeypatch.setattr(fetch.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, "", "no net"))
    with pytest.raises(FastpathError, match="pip index versions"):
        fetch.released_versions()


def test_every_series_applies_to_its_own_pin_with_no_fuzz() -> None:
    """What CI's 'sglang-fastpath check' asserts, on the repository's own patches/."""
    reports = check_pinned()
    assert {r.label for r in reports} >= {"series", "backport/v0.5.9", UPSTREAM.label}
    bad = [(r.label, r.lint, [p for x in r.results for p in x.problems]) for r in reports if not r.ok]
    assert not bad, bad


def test_upstream_patch_without_pr_text_fails_the_check(project: Path) -> None:
    folder = project / "patches" / "upstream" / f"v{UPSTREAM.version}"
    (folder / "0002.md").unlink()
    text = (folder / "0001.md").read_text().replace("## Accuracy Tests\n", "## Accuracy\n")
    (folder / "0001.md").write_text(text)
    report = check_set(_set(UPSTREAM.label))
    assert not report.ok
    assert any("0002" in p and "no pull-request text" in p for p in report.lint), report.lint
    assert any("0001.md" in p and "## Accuracy Tests" in p for p in report.lint), report.lint


def test_a_broken_upstream_patch_is_named(project: Path) -> None:
    folder = project / "patches" / "upstream" / f"v{UPSTREAM.version}"
    patch = read_series(folder).patches[0]
    text = patch.read_text()
    context = '\n     """Mark the enclosed scope as inside a tc_piecewise CUDA graph'
    assert context in text
    patch.write_text(text.replace(context, context.replace("Mark", "Flag"), 1))
    report = check_set(_set(UPSTREAM.label))
    problems = [p for r in report.results for p in r.problems]
    assert not report.ok and any(patch.name in p and "context_manager.py" in p for p in problems), problems


def test_upstream_export_roundtrip_is_byte_identical(project: Path, tmp_path: Path) -> None:
    """source --series upstream/vX then export --series upstream/vX rewrites nothing."""
    folder = project / "patches" / "upstream" / f"v{UPSTREAM.version}"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    tree = make_source(tmp_path / "up", series=UPSTREAM.label)
    result = export_series(tree, find_set(UPSTREAM.label).directory)
    assert result.changed == [] and result.removed == []
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_release_table_says_which_patch_applies_where(project: Path) -> None:
    """The main series applies to 0.5.17 only, the upstream port to its own release only."""
    matrix = check_bases([UPSTREAM.version, BASE_VERSION], [_set("series"), _set(UPSTREAM.label)])
    assert matrix.versions == [BASE_VERSION, UPSTREAM.version]
    for (label, name), states in matrix.cells.items():
        home = BASE_VERSION if label == "series" else UPSTREAM.version
        other = UPSTREAM.version if home == BASE_VERSION else BASE_VERSION
        assert states[home] == "ok", (label, name, states)
        if name.startswith(("0001-", "0002-")):
            assert states[other] == "FAILS", (label, name, states)
    table = format_matrix(matrix).splitlines()
    assert table[0] == f"| series | patch | {BASE_VERSION} | {UPSTREAM.version} |"
    assert f"| {UPSTREAM.label} | 0001 | FAILS | ok |" in table


def test_every_main_patch_needs_a_port_or_a_reason(project: Path) -> None:
    upstream = _set(UPSTREAM.label)
    main = read_series(project / "patches").patches
    ported = {slug(p.name) for p in read_series(upstream.directory).patches}
    assert {slug(p.name) for p in main[:3]} <= ported, "0001-0003 are ported"
    (project / "patches" / "9001-Extra-fix.patch").write_text("Subject: [PATCH] Extra fix\n\nbody\n")
    with open(project / "patches" / "series", "a") as f:
        f.write("9001-Extra-fix.patch\n")
    unported = [p.name for p in read_series(project / "patches").patches if slug(p.name) not in ported]
    reasons = not_ported_reasons(upstream)  # the repository's own, copied
    assert missing_upstream_counterparts(upstream) == [n for n in unported if slug(n) not in reasons]
    assert "9001-Extra-fix.patch" in missing_upstream_counterparts(upstream)
    lines = [f"{slug(n)} upstream does not need it: test" for n in unported if n != "9001-Extra-fix.patch"]
    (upstream.directory / "not-ported").write_text("# slug reason\n" + "\n".join(lines) + "\nExtra-fix\n")
    assert missing_upstream_counterparts(upstream) == ["9001-Extra-fix.patch"], "a slug without a reason counts as missing"
    cli = subprocess.run([sys.executable, "-m", "sglang_fastpath", "check", "--strict-upstream"],
                         capture_output=True, text=True)
    assert cli.returncode == 1 and "9001" in cli.stdout and "check: FAILED" in cli.stdout


def test_strict_upstream_check_passes_on_the_repository() -> None:
    """CI's gate (issue 15): each 0.5.17 patch has a port in every upstream series or a written reason."""
    for upstream in upstream_sets(REPO):
        reasons = not_ported_reasons(upstream)
        assert missing_upstream_counterparts(upstream) == [], upstream.label
        main = {slug(p.name) for p in read_series(REPO / "patches").patches}
        ported = {slug(p.name) for p in read_series(upstream.directory).patches}
        assert set(reasons) <= main - ported, f"{upstream.label}/not-ported names a ported or unknown patch"
    cli = subprocess.run([sys.executable, "-m", "sglang_fastpath", "check", "--strict-upstream"],
                         capture_output=True, text=True, cwd=REPO)
    assert cli.returncode == 0 and "check: ok" in cli.stdout, cli.stdout[-2000:] + cli.stderr[-2000:]


# -- pull requests --------------------------------------------------------------


def test_every_upstream_patch_has_a_template_pr_text() -> None:
    assert pull_request.lint(UPSTREAM) == []
    for patch in read_series(UPSTREAM.directory).patches:
        pr = pull_request.load(UPSTREAM, patch.name[:4])
        assert pr.title == subject(patch) and "\n" not in pr.title
        rendered = pr.render()
        assert rendered.startswith(pr.title + "\n\n")
        positions = [rendered.index(h + "\n") for h in pull_request.TEMPLATE_HEADINGS]
        assert positions == sorted(positions)


@pytest.fixture(scope="module")
def pr_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One wheel tree for the pr tests: write_branch reuses a tree whose pristine is the pinned wheel."""
    return tmp_path_factory.mktemp("pr") / "wheel-tree"


def test_pr_cli_prints_title_and_body_and_writes_a_stacked_branch(project: Path, pr_tree: Path) -> None:
    dest = pr_tree
    cli = subprocess.run([sys.executable, "-m", "sglang_fastpath", "pr", "3", "--dest", str(dest)],
                         capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    pr = pull_request.load(_set(UPSTREAM.label), "0003")
    assert cli.stdout == pr.render()
    assert pr.depends_on == ("0001",)
    branch = git.git(dest, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip()
    assert branch == pr.branch
    log = git.git(dest, "log", "--format=%s", f"{PRISTINE_TAG}..HEAD").stdout.splitlines()
    first = read_series(pr.patch.parent).patches[0]
    assert log == [pr.title, subject(first)], "the patch, on top of the one it depends on"
    assert "not upstream's history" in cli.stderr


def test_pr_branch_on_an_upstream_clone_starts_at_the_release_tag(project: Path, pr_tree: Path, tmp_path: Path) -> None:
    series_set = _set(UPSTREAM.label)
    pr = pull_request.load(series_set, "0001")
    pull_request.write_branch(pr, series_set, pr_tree)
    clone = tmp_path / "sglang"
    subprocess.run(["git", "clone", "-q", "--shared", "--branch", "main", str(pr_tree), str(clone)], check=True)
    with pytest.raises(FastpathError, match=f"no tag v{UPSTREAM.version}"):
        pull_request.write_branch(pr, series_set, upstream_repo=clone)
    git.git(clone, "tag", f"v{UPSTREAM.version}", "origin/main")
    branch = pull_request.write_branch(pull_request.load(series_set, "0002"), series_set, upstream_repo=clone)
    assert branch.pushable and branch.base == f"v{UPSTREAM.version}"
    changed = git.git(clone, "diff", "--name-only", branch.base, "HEAD").stdout.split()
    assert "python/sglang/srt/distributed/all_reduce_stats.py" in changed
    assert git.git(clone, "rev-list", "--count", f"{branch.base}..HEAD").stdout.strip() == "1"


def test_pr_never_replaces_another_tree(project: Path, tmp_path: Path) -> None:
    other = tmp_path / "someone-elses-tree"
    other.mkdir()
    (other / "work.py").write_text("edits\n")
    series_set = _set(UPSTREAM.label)
    with pytest.raises(FastpathError, match="is not a tree of"):
        pull_request.write_branch(pull_request.load(series_set, "0001"), series_set, other)
    assert (other / "work.py").read_text() == "edits\n"


def test_pr_refuses_an_unknown_patch(project: Path) -> None:
    with pytest.raises(FastpathError, match="has no patch 0099"):
        pull_request.load(_set(UPSTREAM.label), "99")

"""source / export / check / wheel on a real pristine SGLang 0.5.17 wheel (downloaded once)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from fastpath_fixtures import REPO, make_project

from sglang_fastpath.series import git
from sglang_fastpath.series.check import check_pinned
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.series.export import export_series
from sglang_fastpath.fetch import fetch_pinned, verify_wheel
from sglang_fastpath.pins import BASE_VERSION, find_pin, fastpath_version
from sglang_fastpath.series.source import make_source
from sglang_fastpath.wheel.archive import verify_record
from sglang_fastpath.wheel.build import build_wheels

# slow: real wheel builds, source trees and export round trips, about 50 s on 2 cores (test/README.md).
pytestmark = pytest.mark.slow

EDITED = "python/sglang/srt/utils/__init__.py"
ADDED = "python/sglang/srt/fastpath_test_marker.py"


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_project(tmp_path)
    monkeypatch.setenv("SGLANG_FASTPATH_ROOT", str(root))
    monkeypatch.setenv("SGLANG_FASTPATH_WHEEL_CACHE", str(REPO / "build" / "cache" / "wheels"))
    return root


def _commit_two_changes(tree: Path) -> None:
    with open(tree / EDITED, "a") as f:
        f.write("\n# fastpath test edit\n")
    git.git(tree, "add", EDITED)
    git.git(tree, "commit", "-q", "-m", "Edit utils\n\nProblem: test. Fix: test.", date="2026-11-30T00:00:00+0000")
    (tree / ADDED).write_text("MARKER = 'fastpath'\n")
    git.git(tree, "add", ADDED)
    git.git(tree, "commit", "-q", "-m", "Add a marker\n\nProblem: test. Fix: test.", date="2026-11-30T00:01:00+0000")


def _snapshot(patches: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(patches.iterdir()) if p.is_file()}


def test_export_roundtrip_is_byte_identical(project: Path) -> None:
    tree = make_source()
    _commit_two_changes(tree)
    first = export_series()
    assert len(first.written) == 2 and first.changed == first.written
    before = _snapshot(project / "patches")
    assert "Subject: [PATCH] Edit utils" in before[first.written[0]].decode()
    # Rebuild the tree from the exported series, export again: nothing may change.
    make_source(force=True)
    again = export_series()
    assert again.changed == [] and again.removed == []
    assert _snapshot(project / "patches") == before
    reports = check_pinned()
    assert [r.ok for r in reports] == [True], reports


def test_broken_patch_is_named_with_file_and_hunk(project: Path) -> None:
    tree = make_source()
    _commit_two_changes(tree)
    names = export_series().written
    first = project / "patches" / names[0]
    text = first.read_text()
    # Corrupt a context line (not a +/- line) of the first hunk.
    head, hunk = text.split("\n@@ ", 1)
    lines = hunk.split("\n")
    ctx = next(i for i, line in enumerate(lines[1:], 1) if line.startswith(" ") and line.strip())
    lines[ctx] = " this line is not in sglang"
    first.write_text(head + "\n@@ " + "\n".join(lines))
    report = check_pinned()[0]
    assert not report.ok
    problems = [p for r in report.results for p in r.problems]
    assert any(names[0] in p and "python/sglang/srt/utils/__init__.py" in p and "hunk #1" in p for p in problems), problems
    cli = subprocess.run([sys.executable, "-m", "sglang_fastpath", "check"], capture_output=True, text=True)
    assert cli.returncode == 1
    assert "FAILS" in cli.stdout and "hunk #1" in cli.stdout


def test_unlisted_patch_fails_lint(project: Path) -> None:
    (project / "patches" / "0009-stray.patch").write_text("Subject: [PATCH] stray\n\nbody\n")
    report = check_pinned()[0]
    assert not report.ok and any("0009-stray.patch" in p for p in report.lint)


def test_wheel_carries_patches_version_and_valid_record(project: Path, tmp_path: Path) -> None:
    tree = make_source()
    _commit_two_changes(tree)
    export_series()
    built = build_wheels(tmp_path / "dist", ["cp311"])
    assert len(built) == 1
    wheel = built[0].path
    assert wheel.name.startswith(f"sglang-{fastpath_version()}-cp311")
    assert verify_record(wheel) == []
    info = f"sglang-{fastpath_version()}.dist-info"
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read("sglang/srt/utils/__init__.py").decode().endswith("# fastpath test edit\n")
        assert zf.read("sglang/srt/fastpath_test_marker.py") == b"MARKER = 'fastpath'\n"
        assert f"Version: {fastpath_version()}\n" in zf.read(f"{info}/METADATA").decode()
        manifest = json.loads(zf.read(f"{info}/fastpath.json"))
        assert [p["name"] for p in manifest["patches"]] == [p.name for p in sorted((project / "patches").glob("*.patch"))]
        assert not any(n.startswith(f"sglang-{BASE_VERSION}.dist-info/") for n in zf.namelist())
    # pip accepts it and the installed metadata reports the fork's version.
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--no-index",
                    "--target", str(target), str(wheel)], check=True)
    probe = subprocess.run([sys.executable, "-c", "import importlib.metadata as m; print(m.version('sglang'))"],
                           capture_output=True, text=True, env={"PYTHONPATH": str(target)}, check=True)
    assert probe.stdout.strip() == fastpath_version()
    assert (target / "sglang/srt/fastpath_test_marker.py").is_file()


def test_record_check_catches_tampering(tmp_path: Path, project: Path) -> None:
    wheel = build_wheels(tmp_path / "dist", ["cp311"])[0].path
    tampered = tmp_path / "tampered.whl"
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tampered, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "sglang/version.py":
                data += b"# tampered\n"
            dst.writestr(info, data)
    assert any("sglang/version.py" in p for p in verify_record(tampered))


def test_wrong_sha256_is_refused(tmp_path: Path, project: Path) -> None:
    pin = find_pin(BASE_VERSION)
    good = fetch_pinned(BASE_VERSION)
    bad = tmp_path / pin.filename
    bad.write_bytes(good.read_bytes() + b"\0")
    with pytest.raises(FastpathError, match="sha256"):
        verify_wheel(bad, pin)
    cli = subprocess.run([sys.executable, "-m", "sglang_fastpath", "check", "--wheel", str(bad)],
                         capture_output=True, text=True)
    assert cli.returncode == 2
    assert cli.stderr.count("\n") == 1 and "sha256" in cli.stderr


def test_wrong_version_is_refused(tmp_path: Path, project: Path) -> None:
    pin = find_pin(BASE_VERSION)
    other = tmp_path / "sglang-0.5.9-py3-none-any.whl"
    other.write_bytes(b"not a wheel")
    with pytest.raises(FastpathError, match="pinned to sglang 0.5.17"):
        verify_wheel(other, pin)


def test_source_refuses_to_discard_edits(project: Path) -> None:
    tree = make_source()
    (tree / EDITED).write_text("dirty\n")
    with pytest.raises(FastpathError, match="uncommitted edits"):
        make_source()
    assert (tree / EDITED).read_text() == "dirty\n"

"""Committed results hold no absolute machine path; ``portable`` rewrites recorded commands and
environments (repository ``.``, interpreter ``python3``, ``<venv>``, ``$OUT``), the driver uses it,
and its CLI sanitizes existing folders in place."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmark.driver import artifacts, portable as portable_mod
from benchmark.driver.orchestrate import JobOutcome
from benchmark.driver.portable import portable, portable_env, portable_file

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmark" / "results"
# The top-level folders a machine's own paths start with; an absolute path under one of them is a
# machine path (``$OUT/work/...`` or ``x/opt/`` is relative). The tests spell them from this tuple.
MACHINE_DIRS = ("work", "opt", "root", "home")
MACHINE_PATH = re.compile(r"(?<![\w.\-$>~])/(?:" + "|".join(MACHINE_DIRS) + ")/")
SUFFIXES = (".txt", ".json", ".md", ".sh", ".csv")
# A made-up machine: repository, interpreter in a venv, device output folder.
ROOT, PY, VENV, OUT = "/srv/ck", "/srv/env/.venv/bin/python3", "/srv/env/.venv", "/srv/out"
PATHS = {"repo_root": ROOT, "python": PY, "venv": VENV, "out": OUT}


def test_no_committed_results_text_holds_a_machine_path() -> None:
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--", "benchmark/results"],
                            capture_output=True, text=True, check=True).stdout.split("\0")
    offenders = []
    for name in filter(None, listed):
        path = REPO / name
        if path.suffix in SUFFIXES and path.is_file():
            text = path.read_text(errors="replace")
            found = sorted(set(MACHINE_PATH.findall(text)))
            if found:
                offenders.append(f"{name}: {' '.join(found)}")
    assert offenders == [], ("absolute machine paths in committed results; sanitize the folder with "
                             "python -m benchmark.driver.portable --repo-root R --python P --out O FOLDER:\n"
                             + "\n".join(offenders))


def test_the_machine_path_pattern() -> None:
    work, opt, root, home = MACHINE_DIRS
    absolute = f'"/{work}/m" x:/{opt}/y (/{root}/z) /{home}/u'
    assert MACHINE_PATH.findall(absolute) == [f"/{d}/" for d in MACHINE_DIRS]
    assert MACHINE_PATH.findall(f"$OUT/{work}/t <venv>/{opt}/ a/{root}/ /tmp/{home}/x ~/{home}/") == []


@pytest.mark.parametrize(("text", "expected"), [
    (f"cd {ROOT}", "cd ."),
    (f"cd {ROOT}/", "cd ./"),
    (f"{PY} benchmark/run.py --x", "python3 benchmark/run.py --x"),
    (f"PYTHONPATH={ROOT}/python:/tmp/site-fork:{ROOT} x", "PYTHONPATH=python:/tmp/site-fork:. x"),
    (f'File \\"{ROOT}/benchmark/e2e.py\\", line 3', 'File \\"benchmark/e2e.py\\", line 3'),
    (f"{VENV}/bin:/usr/bin", "<venv>/bin:/usr/bin"),
    (f"{VENV}/lib/python3.12/site-packages/t.py:1: W", "<venv>/lib/python3.12/site-packages/t.py:1: W"),
    (f"--out {OUT}/bench", "--out $OUT/bench"),
    (f"rootdir: {ROOT}", "rootdir: ."),
    # whole paths only: not a longer name, nor a path that merely contains it; python3.12 is in the venv
    (f"{ROOT}2/a /x{ROOT}/a {PY}.12", f"{ROOT}2/a /x{ROOT}/a <venv>/bin/python3.12"),
    ("/tmp/site-fork:/tmp/m/dense8", "/tmp/site-fork:/tmp/m/dense8"),
])
def test_portable_rewrites_machine_paths(text: str, expected: str) -> None:
    assert portable(text, **PATHS) == expected


def test_portable_prefers_the_most_specific_path() -> None:
    nested = {"repo_root": ROOT, "python": f"{ROOT}/.venv/bin/python3", "venv": f"{ROOT}/.venv",
              "out": f"{ROOT}/out"}
    text = f"{ROOT}/.venv/bin/python3 {ROOT}/.venv/bin {ROOT}/out/x {ROOT}/y"
    assert portable(text, **nested) == "python3 <venv>/bin $OUT/x y"


def test_portable_ignores_missing_and_root_paths() -> None:
    assert portable("/usr/bin/x /a", repo_root="/", python="", venv=None, out=None) == "/usr/bin/x /a"


def test_portable_env_drops_path_and_rewrites_the_rest() -> None:
    env = {"PATH": f"{VENV}/bin:/srv/gcc/bin", "PYTHONPATH": f"/tmp/site-fork:{ROOT}/python", "CUDA_X": "1"}
    assert portable_env(env, **PATHS) == {"PYTHONPATH": "/tmp/site-fork:python", "CUDA_X": "1"}


def test_driver_command_and_env_are_portable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "executable", PY)
    monkeypatch.setenv("OUT", OUT)
    job = SimpleNamespace(name="e2e-fork-tp1")
    outcome = JobOutcome(job=job, status="ok", seconds=3.0,  # type: ignore[arg-type]
                         command=[PY, "-m", "benchmark.worker", "--spec", "/tmp/s.json"],
                         env={"PYTHONPATH": f"{ROOT}/python:/tmp/site-fork:{ROOT}"})
    text = artifacts.command_text(["benchmark/run.py", "--out", f"{OUT}/bench"], ROOT, [outcome], Path(ROOT))
    assert text.splitlines()[1:3] == ["cd .", "python3 benchmark/run.py --out $OUT/bench"]
    assert "env PYTHONPATH=python:/tmp/site-fork:. python3 -m benchmark.worker --spec /tmp/s.json" in text
    record = artifacts.env_record([], [], tmp_path, [], environ={"PATH": "/srv/x/bin", "PYTHONPATH": str(tmp_path)})
    assert record["host"]["executable"] == "python3"
    assert record["environment"] == {"PYTHONPATH": "."}


def test_cli_sanitizes_a_folder_in_its_own_json_layout(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = tmp_path / "run"
    (folder / "sub").mkdir(parents=True)
    env = {"host": {"executable": PY}, "environment": {"PATH": f"{VENV}/bin", "PYTHONPATH": f"/tmp/s:{ROOT}/python"}}
    (folder / "env.json").write_text(json.dumps(env, indent=1) + "\n")
    (folder / "sub" / "pytest.txt").write_text(f"rootdir: {ROOT}\n")
    (folder / "clean.txt").write_text("nothing here\n")
    (folder / "raw.tar.gz").write_bytes(b"\x1f\x8b" + ROOT.encode())  # not a readable archive
    assert portable_mod.main(["--repo-root", ROOT, "--python", PY, "--out", OUT, str(folder)]) == 0
    assert "raw.tar.gz: left as it is, not a readable .tar.gz" in capsys.readouterr().err
    assert (folder / "env.json").read_text() == json.dumps(
        {"host": {"executable": "python3"}, "environment": {"PYTHONPATH": "/tmp/s:python"}}, indent=1) + "\n"
    assert (folder / "sub" / "pytest.txt").read_text() == "rootdir: .\n"
    assert (folder / "raw.tar.gz").read_bytes() == b"\x1f\x8b" + ROOT.encode()
    assert not portable_file(folder / "env.json", ROOT, PY, venv=VENV, out=OUT)  # already portable


def _archive_texts(path: Path):
    """(member name, text) of each UTF-8 text member (``portable.TEXT_SUFFIXES``) of a ``.tar.gz``."""
    with tarfile.open(path, "r:gz") as archive:
        for member in archive.getmembers():
            if member.isfile() and Path(member.name).suffix in portable_mod.TEXT_SUFFIXES:
                try:
                    yield member.name, archive.extractfile(member).read().decode()
                except UnicodeDecodeError:
                    continue


def test_no_committed_results_archive_holds_a_machine_path_in_its_text() -> None:
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--", "benchmark/results/*.tar.gz"],
                            capture_output=True, text=True, check=True).stdout.split("\0")
    offenders = []
    for name in filter(None, listed):
        for member, text in _archive_texts(REPO / name):
            found = sorted(set(MACHINE_PATH.findall(text)))
            if found:
                offenders.append(f"{name}:{member}: {' '.join(found)}")
    assert offenders == [], ("absolute machine paths in committed results archives; sanitize the folder with "
                             "python -m benchmark.driver.portable --repo-root R --python P --out O --home H FOLDER:\n"
                             + "\n".join(offenders[:40]))


def test_portable_archive_rewrites_text_members_and_keeps_the_rest(tmp_path: Path) -> None:
    archive = tmp_path / "raw.tar.gz"
    members = {"logs/e2e.log": f"cd {ROOT} && {PY} -m x --out {OUT}/bench\n".encode(),
               "raw/a.jsonl": f'{{"site": "{ROOT}/python"}}\n'.encode(),
               "raw/blob.bin": f"{ROOT}/kept".encode(), "logs/latin1.log": f"{ROOT} \xe9".encode("latin-1")}
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o640
            tar.addfile(info, io.BytesIO(data))
    assert portable_mod.portable_archive(archive, **PATHS)
    with tarfile.open(archive, "r:gz") as tar:
        got = {m.name: (tar.extractfile(m).read(), m.mode) for m in tar.getmembers()}
    assert got["logs/e2e.log"] == (b"cd . && python3 -m x --out $OUT/bench\n", 0o640)
    assert got["raw/a.jsonl"][0] == b'{"site": "python"}\n'
    assert got["raw/blob.bin"][0] == members["raw/blob.bin"]  # not a text member
    assert got["logs/latin1.log"][0] == members["logs/latin1.log"]  # not UTF-8: left as it is
    assert not portable_mod.portable_archive(archive, **PATHS)  # nothing left to rewrite


def test_portable_writes_the_home_folder_as_a_tilde() -> None:
    assert portable("/srv/home/u/.cache/tvm-ffi x", **PATHS, home="/srv/home/u") == "~/.cache/tvm-ffi x"

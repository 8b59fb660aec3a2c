"""benchmark/patches/stock-graph-memory-held.patch: patch 0040's logging alone, applied to stock 0.5.17 on the device
so that a benchmark reads stock's graph memory by the same count as the fork's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_fastpath.paths import patches_dir
from sglang_trees import trees  # noqa: F401 (a fixture)

STOCK_PATCH = Path(__file__).resolve().parents[1] / "benchmark" / "patches" / "stock-graph-memory-held.patch"


def _changed_files(patch: str) -> list[str]:
    return [line.split(" b/", 1)[1] for line in patch.splitlines() if line.startswith("diff --git ")]


def _added(patch: str) -> list[str]:
    return [line[1:] for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")]


def test_adds_only_lines_of_patch_0040() -> None:
    (p0040,) = patches_dir().glob("0040-*.patch")
    ours = set(_added(p0040.read_text()))
    stock = _added(STOCK_PATCH.read_text())
    assert stock, "the stock patch adds nothing"
    assert [line for line in stock if line not in ours] == []


def patched_stock_files(pristine: Path, site: Path) -> Path:
    """The pristine files the patch touches, copied under ``site`` as a site holds them (``sglang/...``), and the
    patch applied as the device can: from the site's root, stripping ``a/python/``. Returns ``site``."""
    for rel in _changed_files(STOCK_PATCH.read_text()):
        dest = site / Path(rel).relative_to("python")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(pristine / rel, dest)
    subprocess.run(["git", "apply", "-p2", str(STOCK_PATCH)], cwd=site, check=True)
    return site


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_applies_to_a_stock_site(trees, tmp_path: Path) -> None:
    """Applied as the device does it: from a site's root (sglang/...), strip a/python/."""
    patched_stock_files(trees.pristine, tmp_path)
    usage = (tmp_path / "sglang/srt/model_executor/graph_memory_usage.py").read_text()
    assert "def graph_memory_held(" in usage and "def describe_graph_memory_held(" in usage
    worker = (tmp_path / "sglang/srt/speculative/eagle_worker_v2.py").read_text()
    assert worker.count("describe_graph_memory_held(") >= 3  # draft decode, draft extend, adaptive state
    compile(worker, "eagle_worker_v2.py", "exec")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_carried_files_are_the_patched_stock_files(trees, tmp_path: Path) -> None:
    """test/gpu/stock_held_files.sh writes, for .carry, the files the device's stock_held_site copies over a copy of
    the stock site (the device may lack git and patch): the pristine files with the patch applied, nothing else."""
    repo = STOCK_PATCH.parents[2]
    out = tmp_path / "carried"
    subprocess.run(["bash", str(repo / "test/gpu/stock_held_files.sh"), str(out)], cwd=repo, check=True,
                   env={**os.environ, "PYTHON": sys.executable}, capture_output=True)
    expected = patched_stock_files(trees.pristine, tmp_path / "expected")
    carried = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert carried == sorted(p.relative_to(expected) for p in expected.rglob("*") if p.is_file())
    assert all((out / p).read_bytes() == (expected / p).read_bytes() for p in carried)

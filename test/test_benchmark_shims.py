"""benchmark/ as a package: the old script paths are shims onto driver/ and tools/, the worker runs
as ``python -m benchmark.worker``, and no module of the harness edits ``sys.path``."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmark"
SHIMS = sorted(p for p in BENCH.glob("*.py") if p.name not in ("__init__.py", "script_shim.py"))


def without_pythonpath() -> dict[str, str]:
    """This environment without PYTHONPATH: only the shims' own path may find the package."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def shim_target(path: Path) -> str:
    """The module a shim hands to ``run_module``."""
    found = re.findall(r'run_module\("([\w.]+)"\)', path.read_text())
    assert len(found) == 1, f"{path.name}: not a shim"
    return found[0]


def has_main_block(module: str) -> bool:
    tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text())
    return any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body)


def test_every_shim_names_a_program_of_the_package() -> None:
    assert {p.stem for p in SHIMS} >= {"run", "compare", "plot", "results_index", "cycle_phases", "pysample",
                                       "trace_summary", "collective_cost", "attn_verify_bench"}
    for path in SHIMS:
        target = shim_target(path)
        assert target.split(".")[1] in ("driver", "tools") and target.endswith("." + path.stem), target
        assert has_main_block(target), f"{target} has no __main__ block: the shim would run nothing"


@pytest.mark.parametrize("how", ["script", "module"])
def test_run_shim_from_another_folder(tmp_path: Path, how: str) -> None:
    """``python benchmark/run.py`` from any folder and ``python -m benchmark.run`` from the root reach the driver."""
    argv = [str(BENCH / "run.py")] if how == "script" else ["-m", "benchmark.run"]
    cwd = tmp_path if how == "script" else REPO
    done = subprocess.run([sys.executable, *argv, "--dry-run", "--variant", "nonsense"], capture_output=True,
                          text=True, cwd=cwd, env=without_pythonpath())
    assert done.returncode == 2, done.stderr  # the driver's own usage error (BenchError), not an ImportError
    assert done.stderr == "run.py: error: --variant 'nonsense': write NAME=SITE_DIR, e.g. stock=/tmp/site-stock\n"


def test_worker_runs_as_a_package() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmark.worker", "--help"], capture_output=True, text=True,
                          cwd=REPO, env=without_pythonpath())
    assert done.returncode == 0 and done.stdout.startswith("usage: benchmark.worker"), done.stderr


def test_nothing_edits_sys_path() -> None:
    edits = re.compile(r"sys\.path(\[[^]]*\])?\s*(=|\+=)|sys\.path\.(insert|append|extend)")
    offenders = [f"{p.relative_to(REPO)}:{n}" for p in BENCH.rglob("*.py") if "results" not in p.parts
                 for n, line in enumerate(p.read_text().splitlines(), 1) if edits.search(line)]
    assert offenders == []

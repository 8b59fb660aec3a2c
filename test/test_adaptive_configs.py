"""The adaptive speculation configs the fork ships (``sglang-fastpath adaptive-config``).

A user of the wheel, the offline bundle or the Docker image has no checkout, so the configs the README and the
benchmarks use must come with the tool package: each shipped name resolves to a file inside the package that the
package data of ``python/pyproject.toml`` covers; ``benchmark/configs/adaptive-NAME.json`` is a link to that same
file (the benchmarks measure what users run); the verb prints the path, lists the configs, and names the shipped
ones on a wrong name.
"""

from __future__ import annotations

import fnmatch
import json
import sys
from pathlib import Path

import pytest

from sglang_fastpath import adaptive_configs
from sglang_fastpath.cli import main

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "python" / "sglang_fastpath"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - CI runs 3.12
    tomllib = pytest.importorskip("tomli")


@pytest.mark.parametrize("name", list(adaptive_configs.CONFIGS))
def test_each_shipped_config_is_package_data_the_benchmarks_link_to(name: str) -> None:
    path = adaptive_configs.config_path(name)
    assert path.parent == PACKAGE / "data" / "adaptive"
    cfg = json.loads(path.read_text())
    assert cfg["policy"] == "throughput"
    patterns = tomllib.loads((REPO / "python" / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    relative = path.relative_to(PACKAGE).as_posix()
    assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns["sglang_fastpath"]), (relative, patterns)
    link = REPO / "benchmark" / "configs" / f"adaptive-{name}.json"
    assert link.is_symlink() and link.resolve() == path


def test_the_verb_prints_a_path_and_lists_the_configs(capsys) -> None:
    assert main(["adaptive-config", "ks-off"]) == 0
    assert capsys.readouterr().out.strip() == str(adaptive_configs.config_path("ks-off"))
    assert main(["adaptive-config"]) == 0
    listing = capsys.readouterr().out
    assert all(f"{name}: {adaptive_configs.config_path(name)}" in listing for name in adaptive_configs.CONFIGS)


def test_a_wrong_name_is_one_line_naming_the_shipped_ones(capsys) -> None:
    assert main(["adaptive-config", "ks_off"]) == 2
    err = capsys.readouterr().err
    assert "no shipped adaptive config 'ks_off'" in err and "ks, ks-off" in err

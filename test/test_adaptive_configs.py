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
import re
import subprocess
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


def _device_bench_vars(name: str) -> set[str]:
    """A switch list of test/gpu/device_bench.sh (what the benchmarks ran), as NAME=VALUE (VALUE 1 when not given)."""
    wanted = ("ALL3_VARS", "ALL3_BF16_VARS", "KV_ONLY_VAR", "STEPS0_VARS", "OFF_VARS")
    lines = [
        line
        for line in (REPO / "test" / "gpu" / "device_bench.sh").read_text().splitlines()
        if line.split("=", 1)[0] in wanted
    ]
    out = subprocess.run(
        ["bash", "-c", "\n".join(lines) + f'\necho "${name}"'], capture_output=True, text=True, check=True
    ).stdout.split()
    return {v if "=" in v else f"{v}=1" for v in out}


@pytest.mark.parametrize("name, bench_vars", [("ks", "ALL3_BF16_VARS"), ("ks-off", "OFF_VARS")])
def test_env_prints_the_switches_the_benchmarks_ran_the_config_with(name: str, bench_vars: str, capsys) -> None:
    assert main(["adaptive-config", name, "--env"]) == 0
    printed = capsys.readouterr().out.split()
    assert len(printed) == len(set(printed))
    assert set(printed) == _device_bench_vars(bench_vars) - {"SGLANG_SPEC_CYCLE_STATS=1"}
    declared = "".join(p.read_text() for p in (REPO / "patches").glob("0*.patch"))
    for switch in printed:  # each one a switch the series declares (envs.SGLANG_*)
        assert re.search(rf"^\+\s+{switch.split('=')[0]} = Env(Bool|Int)\(", declared, re.M), switch


def test_env_without_a_name_is_a_clear_error(capsys) -> None:
    assert main(["adaptive-config", "--env"]) == 2
    assert "adaptive-config --env needs a NAME: ks, ks-off" in capsys.readouterr().err

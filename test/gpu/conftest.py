"""GPU test fixtures: models made once per session by the model factory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _make(kind: str, root: Path, *args: str, name: str | None = None) -> Path:
    out = root / (name or kind)
    if not (out / "target" / "config.json").is_file():
        subprocess.run([sys.executable, "-m", "sglang_fastpath", "models", kind, "--out", str(out), *args], check=True)
    return out


@pytest.fixture(scope="session")
def models_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = os.environ.get("SGLANG_FASTPATH_MODELS")
    return Path(env) if env else tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def tiny_models(models_root: Path) -> Path:
    return _make("tiny", models_root)


@pytest.fixture(scope="session")
def missing_models(models_root: Path) -> Path:
    """The tiny pair with its draft wrong at a seeded 30% of the walk: verify rejects drafts for real, with
    accept lengths that vary per request and cycle (``models.json``: their mean)."""
    return _make("tiny", models_root, "--draft-miss-rate", "0.3", name="tiny-misses")


@pytest.fixture(scope="session")
def oracle_models(models_root: Path) -> Path:
    return _make("oracle", models_root)


@pytest.fixture(scope="session")
def dense_models(models_root: Path) -> Path:
    return _make("dense", models_root, "--layers", "4", "--device", "cuda")


@pytest.fixture(scope="session")
def kimi_models(models_root: Path) -> Path:
    """Kimi-K2.5 text shapes, 4 layers (1 dense + 3 MoE, INT4 experts): ~33 GiB, drawn on the GPU."""
    return _make("kimi", models_root, "--layers", "4", "--device", "cuda")


@pytest.fixture(scope="session")
def engine_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = os.environ.get("OUT")
    return Path(out) / "engines" if out else tmp_path_factory.mktemp("engines")

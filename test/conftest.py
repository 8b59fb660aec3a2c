"""Shared pytest setup: ``gpu`` tests are skipped (and reported as skipped) without CUDA.

The markers (``gpu``, ``network``, ``slow``) are registered in pytest.ini.
"""

from __future__ import annotations

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run test/gpu/run_on_device.sh on a GPU host)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

"""doctor on a stock and a fork install (no deps), and the MoE config lookup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastpath_fixtures import REPO

from sglang_fastpath.fetch import fetch_pinned
from sglang_fastpath.host.moe_config import config_file_name, lookup, moe_shape
from sglang_fastpath.pins import BASE_VERSION, fastpath_version
from sglang_fastpath.wheel.build import build_wheels

# slow: pip installs the pinned stock and fork wheels into sites, about 20 s on 2 cores (test/README.md).
pytestmark = pytest.mark.slow

KIMI_INT4 = {
    "model_type": "deepseek_v3", "n_routed_experts": 384, "moe_intermediate_size": 2048,
    "quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
                            "config_groups": {"group_0": {"weights": {"num_bits": 4, "group_size": 32}}}},
}
DSV3_FP8 = {"model_type": "deepseek_v3", "n_routed_experts": 384, "moe_intermediate_size": 2048,
            "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}


def _install(wheel: Path, target: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--no-index",
                    "--target", str(target), str(wheel)], check=True)


def _doctor(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO / "python")]))
    return subprocess.run([sys.executable, "-m", "sglang_fastpath", "doctor", *args],
                          capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("sites")
    stock, fork = tmp / "stock", tmp / "fork"
    _install(fetch_pinned(BASE_VERSION, "cp311"), stock)
    _install(build_wheels(tmp / "dist", ["cp311"])[0].path, fork)
    return {"stock": stock, "fork": fork}


def test_doctor_tells_stock_from_fork(sites: dict[str, Path]) -> None:
    stock = _doctor(sites["stock"])
    assert f"sglang {BASE_VERSION}: stock, no fastpath patches applied" in stock.stdout
    fork = _doctor(sites["fork"])
    assert f"sglang {fastpath_version()}: fastpath on {BASE_VERSION}" in fork.stdout


def test_doctor_resolves_moe_config_and_warns(sites: dict[str, Path], tmp_path: Path) -> None:
    model = tmp_path / "kimi"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(DSV3_FP8))
    found = _doctor(sites["fork"], "--model", str(model), "--tp", "8", "--device-name", "NVIDIA H200")
    assert "E=384,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json" in found.stdout
    (model / "config.json").write_text(json.dumps(KIMI_INT4))
    missing = _doctor(sites["fork"], "--model", str(model), "--tp", "8", "--pcie",
                      "--device-name", "NVIDIA RTX PRO 6000 Blackwell Server Edition")
    assert missing.returncode == 1
    assert "E=384,N=128,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition,dtype=int4_w4a16.json" in missing.stdout
    assert "WARNING: no tuned fused-MoE config" in missing.stdout
    assert "WARNING: TP=8 over PCIe" in missing.stdout


def test_lookup_order(tmp_path: Path) -> None:
    shape = moe_shape(DSV3_FP8, tp=8)
    assert (shape.experts, shape.n, shape.dtype) == (384, 256, "fp8_w8a8")
    name = config_file_name(shape, "NVIDIA H200")
    for folder in ("triton_3_4_0", "triton_3_10_0"):
        (tmp_path / "configs" / folder).mkdir(parents=True)
    assert lookup(shape, "NVIDIA H200", "3.6.0", tmp_path).found is None
    (tmp_path / "configs" / "triton_3_4_0" / name).write_text("{}")
    (tmp_path / "configs" / "triton_3_10_0" / name).write_text("{}")
    # Newest other version first, compared numerically (3.10 > 3.4).
    assert lookup(shape, "NVIDIA H200", "3.6.0", tmp_path).found.parent.name == "triton_3_10_0"
    down = lookup(shape, "NVIDIA H200", "3.6.0", tmp_path, down=True)
    assert down.found is not None and "reuses the up-projection" in down.how
    (tmp_path / "configs" / "triton_3_6_0").mkdir()
    (tmp_path / "configs" / "triton_3_6_0" / name).write_text("{}")
    assert lookup(shape, "NVIDIA H200", "3.6.0", tmp_path).found.parent.name == "triton_3_6_0"


def test_corrupt_model_config_is_one_line(sites: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    bad = _doctor(sites["fork"], "--model", str(tmp_path))
    assert bad.returncode == 2 and "is not valid JSON" in bad.stderr and bad.stderr.count("\n") == 1

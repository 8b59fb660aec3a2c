"""``python -m moe_tuning``: names, candidates, and the ``check`` CI gate's exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from moe_tuning.__main__ import main
from moe_tuning.config_file import write_configs
from moe_tuning.search_space import KernelConfig
from moe_tuning.shapes import device, rank_shapes

TP8 = rank_shapes(8)
SM120 = device("rtx-pro-6000-server")


def test_names_lists_up_and_down_per_device(capsys: pytest.CaptureFixture[str]):
    assert main(["names", "--tp", "8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8 and TP8.file_name(SM120, down=True) in lines


def test_candidates_prints_the_filtered_space(capsys: pytest.CaptureFixture[str]):
    assert main(["candidates", "--m", "1", "--gemm", "down"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith("BM16 ") for line in lines)


def test_check_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    folder = tmp_path / "configs" / "triton_3_6_0"
    write_configs(folder / TP8.file_name(SM120), {1: KernelConfig(16, 64, 64, 1, 4, 3)})
    assert main(["check", str(tmp_path)]) == 0
    write_configs(folder / TP8.file_name(SM120), {1: KernelConfig(32, 128, 256, 1, 8, 4)})
    assert main(["check", str(tmp_path)]) == 1
    assert "shared memory" in capsys.readouterr().out
    (folder / "E=384,N=128,device_name=,dtype=int4_w4a16.json").write_text("{}")
    assert main(["check", str(tmp_path)]) == 2
    assert "no known device" in capsys.readouterr().err
    assert main(["check", str(tmp_path / "absent")]) == 2

"""sgl-kernel/moe_tuning/config_file.py: SGLang's MoE config JSON read strictly, written, and checked
against the search-space filters (the CI gate: no shipped config exceeds sm_120 shared memory).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moe_tuning import config_file as cf
from moe_tuning.search_space import KernelConfig, SearchSpace
from moe_tuning.shapes import device, rank_shapes
from sglang_fastpath.errors import FastpathError
from sglang_trees import trees  # noqa: F401 (trees: a module-scoped fixture)

TP8 = rank_shapes(8)
SM120 = device("rtx-pro-6000-server")
H200 = device("h200")
SMALL = KernelConfig(16, 64, 128, 1, 4, 3)
BIG = KernelConfig(32, 128, 256, 1, 8, 4)  # ~115 KB: fits the H200, not sm_120
AMD_INT4 = "srt/layers/moe/moe_runner/triton_utils/configs/triton_3_4_0/E=384,N=128,device_name=,dtype=int4_w4a16.json"


def test_write_then_read_round_trips_in_sglangs_layout(tmp_path: Path):
    path = tmp_path / "configs" / "triton_3_6_0" / TP8.file_name(SM120)
    table = {16: SMALL, 1: SMALL, 4: KernelConfig(16, 32, 64, 1, 2, 2)}
    cf.write_configs(path, table)
    raw = json.loads(path.read_text())
    assert list(raw) == ["1", "4", "16"]
    assert raw["4"] == {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1,
                        "num_warps": 2, "num_stages": 2}
    assert cf.read_configs(path) == table
    assert not path.with_name(path.name + ".tmp").exists()


def test_sglang_reads_our_file_the_same_way(tmp_path: Path):
    """SGLang's loader is ``{int(key): val for key, val in json.load(f).items()}``, then ``**config``."""
    path = tmp_path / "x.json"
    cf.write_configs(path, {1: SMALL, 8: BIG})
    as_sglang = {int(k): v for k, v in json.loads(path.read_text()).items()}
    assert as_sglang == {1: SMALL.kwargs(), 8: BIG.kwargs()}


def test_writing_an_empty_table_is_refused(tmp_path: Path):
    with pytest.raises(FastpathError, match="empty config table"):
        cf.write_configs(tmp_path / "x.json", {})


def good_entry(**change) -> dict:
    return {**SMALL.kwargs(), **change}


@pytest.mark.parametrize("text, match", [
    ("{", "not valid JSON"),
    ("[]", "expected a non-empty JSON object"),
    ("{}", "expected a non-empty JSON object"),
    (json.dumps({"one": good_entry()}), "key 'one' is not a token count"),
    (json.dumps({"0": good_entry()}), "key '0' is not a token count"),
    (json.dumps({"1": good_entry(), "01": good_entry()}), "key '01' repeats M=1"),
    (json.dumps({"1": [16, 64]}), "key '1': the config is list"),
    (json.dumps({"2": {"BLOCK_SIZE_M": 16}}), "key '2': missing BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M"),
    (json.dumps({"2": good_entry(waves_per_eu=0)}), "key '2': unknown waves_per_eu"),
    (json.dumps({"2": good_entry(num_warps="4")}), "key '2': num_warps='4' is not a positive integer"),
    (json.dumps({"2": good_entry(num_stages=0)}), "num_stages=0 is not a positive integer"),
    (json.dumps({"2": good_entry(GROUP_SIZE_M=True)}), "GROUP_SIZE_M=True"),
])
def test_corrupt_or_incomplete_files_name_the_file_and_key(tmp_path: Path, text: str, match: str):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(FastpathError, match=match) as err:
        cf.read_configs(path)
    assert str(err.value).startswith(f"{path}: ") and "\n" not in str(err.value)


def test_missing_file(tmp_path: Path):
    with pytest.raises(FastpathError, match="no such config file"):
        cf.read_configs(tmp_path / "absent.json")


def test_sglangs_amd_int4_file_is_refused_for_its_amd_only_key(trees):  # noqa: F811
    path = trees.pristine / "python" / "sglang" / AMD_INT4
    with pytest.raises(FastpathError, match="unknown waves_per_eu"):
        cf.read_configs(path)


def test_check_file_passes_a_valid_sm120_file(tmp_path: Path):
    path = tmp_path / TP8.file_name(SM120)
    cf.write_configs(path, {1: SMALL, 64: KernelConfig(32, 64, 64, 1, 4, 4)})
    assert cf.check_file(path) == []


def test_check_file_flags_sm120_shared_memory_but_not_on_the_h200(tmp_path: Path):
    table = {1: SMALL, 8: BIG}
    sm120 = tmp_path / TP8.file_name(SM120)
    h200 = tmp_path / TP8.file_name(H200)
    cf.write_configs(sm120, table)
    cf.write_configs(h200, table)
    problems = cf.check_file(sm120)
    assert [(p.m, "shared memory" in p.reason) for p in problems] == [(8, True)]
    assert str(problems[0]).startswith(f"{sm120.name}: key '8': needs ~114688 B")
    assert cf.check_file(h200) == []


def test_check_file_uses_the_gemm_the_name_encodes(tmp_path: Path):
    """BK=512 divides gate/up's K=7168 but not down's K=256 at TP=8."""
    wide_k = KernelConfig(16, 16, 512, 1, 4, 2)
    up, down = tmp_path / TP8.file_name(H200), tmp_path / TP8.file_name(H200, down=True)
    space = SearchSpace(block_k=(16, 32, 64, 128, 256, 512))
    cf.write_configs(up, {1: wide_k})
    cf.write_configs(down, {1: wide_k})
    assert cf.check_file(up, space) == []
    assert ["does not divide K=256" in p.reason for p in cf.check_file(down, space)] == [True]


def test_check_file_flags_wgmma_block_m(tmp_path: Path):
    path = tmp_path / TP8.file_name(H200)
    cf.write_configs(path, {512: KernelConfig(64, 64, 64, 1, 4, 3)})
    assert ["BLOCK_SIZE_M=64 is outside" in p.reason for p in cf.check_file(path)] == [True]


def test_check_pair_requires_the_same_keys_and_block_m(tmp_path: Path):
    up, down = tmp_path / TP8.file_name(SM120), tmp_path / TP8.file_name(SM120, down=True)
    cf.write_configs(up, {1: SMALL, 32: KernelConfig(32, 64, 64, 1, 4, 3)})
    cf.write_configs(down, {1: SMALL, 32: KernelConfig(16, 64, 64, 1, 4, 3), 64: SMALL})
    problems = [str(p) for p in cf.check_pair(up, down)]
    assert len(problems) == 2
    assert "M keys [64] are in only one" in problems[0]
    assert "key '32': BLOCK_SIZE_M=16 but the up file has 32" in problems[1]


def test_check_folder_is_the_ci_gate(tmp_path: Path):
    folder = tmp_path / "configs" / "triton_3_6_0"
    cf.write_configs(folder / TP8.file_name(SM120), {1: SMALL})
    cf.write_configs(folder / TP8.file_name(SM120, down=True), {1: SMALL})
    assert cf.check_folder(tmp_path) == []
    cf.write_configs(folder / TP8.file_name(device("rtx-pro-6000-maxq"), down=True), {1: BIG})
    problems = [str(p) for p in cf.check_folder(tmp_path)]
    assert len(problems) == 2
    assert "Max-Q" in problems[0] and "shared memory" in problems[0]
    assert "no up file" in problems[1]

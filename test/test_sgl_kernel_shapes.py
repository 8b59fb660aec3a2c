"""sgl-kernel/moe_tuning/shapes.py: Kimi-K2.5 INT4 GEMM shapes per TP and the config file names,
checked against SGLang 0.5.17's own code (executed from the pinned trees, so upstream drift fails here):
``get_config_file_name`` for the name, the compressed-tensors W4A16 scheme's ``create_weights`` +
Triton repack (on the meta device) for ``w2.shape`` and so for N, ``get_config_dtype_str`` for the dtype.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from moe_tuning import shapes
from sglang_fastpath.errors import FastpathError
from sglang_trees import load_defs, source, trees  # noqa: F401 (trees: a module-scoped fixture)

CONFIG_MODULE = "sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe_triton_config"
WNA16_MODULE = "sglang.srt.layers.quantization.compressed_tensors.schemes.compressed_tensors_wNa16_moe"
TPS = [1, 2, 4, 8]
TREES = ["pristine", "patched"]


def test_kimi_shapes_per_rank_at_tp8():
    r = shapes.rank_shapes(8)
    assert (r.gate_up.n, r.gate_up.k) == (512, 7168)
    assert (r.down.n, r.down.k) == (7168, 256)
    assert r.w2_shape == (384, 7168, 128) and r.file_n == 128
    assert r.gate_up.packed_k == 3584 and r.gate_up.scale_groups == 224 and r.down.scale_groups == 8


@pytest.mark.parametrize("tp", TPS)
def test_gate_up_is_twice_the_rank_intermediate_and_down_is_its_transpose_side(tp: int):
    r = shapes.rank_shapes(tp)
    assert r.gate_up.n == 2 * 2048 // tp and r.down.k == 2048 // tp
    assert r.gate_up.k == r.down.n == 7168
    assert r.file_n == 2048 // tp // 2


@pytest.mark.parametrize("tp", [0, 3, 128])
def test_a_tp_that_does_not_split_into_whole_groups_is_refused(tp: int):
    with pytest.raises(FastpathError, match=f"--tp {tp}"):
        shapes.rank_shapes(tp)


def test_device_names_and_limits():
    assert shapes.device("h200").file_label == "NVIDIA_H200"
    assert shapes.device("rtx-pro-6000-maxq").file_label == "NVIDIA_RTX_PRO_6000_Blackwell_Max-Q_Workstation_Edition"
    assert {d.smem_bytes for d in shapes.DEVICES.values() if d.arch == "sm_120"} == {101376}
    assert shapes.device("h200").smem_bytes == 232448
    with pytest.raises(FastpathError, match="unknown device 'b200'"):
        shapes.device("b200")


def test_tp8_rtx_pro_file_names_are_the_ones_moe_triton_md_names():
    r = shapes.rank_shapes(8)
    dev = shapes.device("rtx-pro-6000-server")
    expected = "E=384,N=128,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition,dtype=int4_w4a16.json"
    assert r.file_name(dev) == expected
    assert r.file_name(dev, down=True).endswith(",dtype=int4_w4a16_down.json")


@pytest.mark.parametrize("tree_name", TREES)
def test_file_names_match_sglangs_own_naming(trees, tree_name: str):  # noqa: F811
    path = source(trees.get(tree_name), CONFIG_MODULE)
    current = {"name": ""}
    defs = load_defs(path, ["get_config_file_name", "get_config_dtype_str"],
                     extra={"get_device_name": lambda: current["name"]})
    dtype = defs["get_config_dtype_str"](torch.bfloat16, use_int4_w4a16=True)
    assert dtype == shapes.DTYPE
    for dev in shapes.DEVICES.values():
        current["name"] = dev.cuda_name
        for tp in TPS:
            r = shapes.rank_shapes(tp)
            for down in (False, True):
                # As the runtime calls it: E, N = w2.shape[2], block_shape [0, group] (0 drops it).
                expected = defs["get_config_file_name"](r.experts, r.w2_shape[2], dtype, [0, 32], False, down)
                assert r.file_name(dev, down) == expected


def _triton_w2_shape(tree, tp: int) -> tuple[int, ...]:
    """w2 after SGLang's W4A16 create_weights and the Triton scheme's repack, on the meta device."""
    path = source(tree, WNA16_MODULE)
    defs = load_defs(path, ["GPTQMarlinState", "CompressedTensorsWNA16MoE.create_weights",
                            "CompressedTensorsWNA16TritonMoE.process_weights_after_loading"],
                     extra={"set_weight_attrs": lambda *args, **kwargs: None})
    scheme = SimpleNamespace(packed_factor=8, strategy="group", group_size=32, actorder=None, sym=True)
    layer = torch.nn.Module()
    layer.moe_tp_size = tp
    kimi = shapes.KIMI_K25
    with torch.device("meta"):
        defs["CompressedTensorsWNA16MoE.create_weights"](
            scheme, layer, kimi.experts, kimi.hidden, kimi.intermediate // tp, torch.bfloat16)
        defs["CompressedTensorsWNA16TritonMoE.process_weights_after_loading"](scheme, layer)
    assert layer.w2_weight_packed.dtype == torch.uint8
    assert tuple(layer.w13_weight_packed.shape) == (kimi.experts, 2 * kimi.intermediate // tp, kimi.hidden // 2)
    return tuple(layer.w2_weight_packed.shape)


@pytest.mark.parametrize("tp", [2, 8])
def test_w2_shape_and_so_n_come_from_sglangs_triton_repack(trees, tp: int):  # noqa: F811
    r = shapes.rank_shapes(tp)
    assert _triton_w2_shape(trees.pristine, tp) == r.w2_shape
    gate_up_b = (r.experts, r.gate_up.n, r.gate_up.packed_k)
    down_b = (r.experts, r.down.n, r.down.packed_k)
    assert down_b == r.w2_shape and gate_up_b[1:] == (2 * 2048 // tp, 3584)


def test_parse_file_name_round_trips():
    for dev in shapes.DEVICES.values():
        for tp in TPS:
            r = shapes.rank_shapes(tp)
            for down in (False, True):
                parsed = shapes.parse_file_name(r.file_name(dev, down))
                assert (parsed.shapes, parsed.device, parsed.down) == (r, dev, down)
                assert parsed.gemm == r.gemm(down)


@pytest.mark.parametrize("name, match", [
    ("E=384,N=128,device_name=NVIDIA_H200.json", "not an INT4 MoE config file name"),
    ("E=256,N=128,device_name=NVIDIA_H200,dtype=int4_w4a16.json", "E=256, but Kimi-K2.5 has 384"),
    ("E=384,N=96,device_name=NVIDIA_H200,dtype=int4_w4a16.json", "N=96"),
    ("E=384,N=128,device_name=,dtype=int4_w4a16.json",
     "E=384,N=128,device_name=,dtype=int4_w4a16.json: no known device"),
])
def test_parse_file_name_refuses_foreign_names(name: str, match: str):
    with pytest.raises(FastpathError, match=match.replace("[", r"\[")):
        shapes.parse_file_name(name)

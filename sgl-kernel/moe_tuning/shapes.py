"""Kimi-K2.5's routed-expert GEMM shapes per TP rank, the target GPUs, and the config file names.

SGLang 0.5.17 runs INT4 experts through ``fused_moe_kernel_gptq_awq`` (only with
``--moe-runner-backend triton``) twice per MoE layer, on weights repacked to
``[E, N, K/2]`` uint8 (two 4-bit values per byte, group-32 scales ``[E, N, K/32]``):

* gate/up: N = 2·I/TP, K = hidden (7168);
* down:    N = hidden,  K = I/TP.

The tuned-config file is keyed by ``N = w2.shape[2]``, the *packed* width of the
down weight, i.e. I/TP/2 (128 at TP=8), not the GEMM's N. The name itself comes
from ``sglang_fastpath.host.moe_config.config_file_name`` (one implementation of
SGLang's naming, checked against the pinned tree by the tests).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sglang_fastpath.errors import FastpathError
from sglang_fastpath.host.moe_config import MoeShape, config_file_name

DTYPE = "int4_w4a16"
PACK = 2  # 4-bit values per byte in the Triton layout
INT32_PACK = 8  # 4-bit values per int32 in the checkpoint layout (compressed-tensors pack-quantized)


@dataclass(frozen=True)
class MoeModel:
    """The routed-expert part of a model that matters to the kernel."""

    name: str
    experts: int
    top_k: int
    hidden: int
    intermediate: int  # moe_intermediate_size, per expert, unsharded
    group_size: int  # INT4 quant group along K


KIMI_K25 = MoeModel("Kimi-K2.5", experts=384, top_k=8, hidden=7168, intermediate=2048, group_size=32)


@dataclass(frozen=True)
class Device:
    """A target GPU: SGLang's device_name and the per-block opt-in shared memory."""

    key: str
    cuda_name: str  # torch.cuda.get_device_name()
    arch: str
    smem_bytes: int  # cudaDevAttrMaxSharedMemoryPerBlockOptin

    @property
    def file_label(self) -> str:
        return self.cuda_name.replace(" ", "_")


SM90_SMEM = 232448
SM120_SMEM = 101376
DEVICES: dict[str, Device] = {
    d.key: d
    for d in (
        Device("h200", "NVIDIA H200", "sm_90", SM90_SMEM),
        Device("rtx-pro-6000-server", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "sm_120", SM120_SMEM),
        Device("rtx-pro-6000-workstation", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "sm_120", SM120_SMEM),
        Device("rtx-pro-6000-maxq", "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "sm_120", SM120_SMEM),
    )
}


def device(key: str) -> Device:
    try:
        return DEVICES[key]
    except KeyError:
        raise FastpathError(f"unknown device {key!r}: use one of {', '.join(DEVICES)}") from None


def device_by_label(label: str) -> Device:
    """The device whose file-name label (spaces -> '_') is ``label``."""
    for d in DEVICES.values():
        if d.file_label == label:
            return d
    known = ", ".join(d.file_label for d in DEVICES.values())
    raise FastpathError(f"no known device has device_name={label!r}: add it to DEVICES or use one of {known}")


@dataclass(frozen=True)
class Gemm:
    """One expert GEMM as the kernel sees it: C[M, N] = A[M, K] · dequant(B[N, K])."""

    name: str  # "gate_up" or "down"
    n: int  # B.shape[1], the kernel's N
    k: int  # A.shape[1], the kernel's K
    group_size: int

    @property
    def packed_k(self) -> int:
        """B.shape[2]: bytes per weight row."""
        return self.k // PACK

    @property
    def scale_groups(self) -> int:
        return self.k // self.group_size


@dataclass(frozen=True)
class RankShapes:
    """Per-rank shapes of one MoE layer under tensor parallelism (all experts on every rank)."""

    model: MoeModel
    tp: int
    gate_up: Gemm
    down: Gemm

    @property
    def experts(self) -> int:
        return self.model.experts

    @property
    def w2_shape(self) -> tuple[int, int, int]:
        """The Triton-layout down weight ``[E, hidden, I_rank/2]`` uint8 SGLang keys the file on."""
        return (self.experts, self.down.n, self.down.packed_k)

    @property
    def file_n(self) -> int:
        return self.w2_shape[2]

    def gemm(self, down: bool) -> Gemm:
        return self.down if down else self.gate_up

    def file_name(self, dev: Device, down: bool = False) -> str:
        shape = MoeShape(self.experts, self.file_n, DTYPE, None)
        return config_file_name(shape, dev.cuda_name, down=down)


def rank_shapes(tp: int, model: MoeModel = KIMI_K25) -> RankShapes:
    """The shapes at ``tp``; refused where I/TP does not split into whole quant groups."""
    if tp < 1 or model.intermediate % tp:
        raise FastpathError(f"--tp {tp} does not divide {model.name}'s moe_intermediate_size {model.intermediate}")
    inter = model.intermediate // tp
    if inter % model.group_size or inter % INT32_PACK:
        raise FastpathError(
            f"--tp {tp} leaves {inter} intermediate columns per rank, not a multiple of the INT4 group "
            f"{model.group_size}: use a TP that divides {model.intermediate // model.group_size}"
        )
    gate_up = Gemm("gate_up", n=2 * inter, k=model.hidden, group_size=model.group_size)
    down = Gemm("down", n=model.hidden, k=inter, group_size=model.group_size)
    return RankShapes(model, tp, gate_up, down)


_NAME = re.compile(r"E=(\d+),N=(\d+),device_name=([^,]*),dtype=" + DTYPE + r"(_down)?\.json")


@dataclass(frozen=True)
class ParsedName:
    shapes: RankShapes
    device: Device
    down: bool

    @property
    def gemm(self) -> Gemm:
        return self.shapes.gemm(self.down)


def parse_file_name(name: str, model: MoeModel = KIMI_K25) -> ParsedName:
    """Shapes, device and GEMM of an INT4 config file name for ``model``."""
    match = _NAME.fullmatch(name)
    if not match:
        raise FastpathError(
            f"{name!r} is not an INT4 MoE config file name: expected "
            f"'E=<experts>,N=<w2 packed width>,device_name=<gpu>,dtype={DTYPE}[_down].json'"
        )
    experts, n, label, down = int(match[1]), int(match[2]), match[3], bool(match[4])
    if experts != model.experts:
        raise FastpathError(f"{name}: E={experts}, but {model.name} has {model.experts} routed experts")
    inter = n * PACK
    if inter <= 0 or model.intermediate % inter:
        raise FastpathError(f"{name}: N={n} is not {model.name}'s intermediate/TP/2 for any TP")
    try:
        return ParsedName(rank_shapes(model.intermediate // inter, model), device_by_label(label), down)
    except FastpathError as exc:
        raise FastpathError(f"{name}: {exc}") from None

"""``sglang-fastpath doctor``: what is installed, on which GPU, and the known slow paths.

Reads package metadata (no SGLang import, so it is fast and works on a broken
install), asks torch for the GPUs when torch is importable, and for a model
reports the fused-MoE config file SGLang would load. Each finding is a line;
warnings name the slow path and the fix.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
from dataclasses import dataclass, field
from pathlib import Path

from sglang_fastpath.host import jit_warm, memory_split
from sglang_fastpath.host.moe_config import lookup, moe_shape, sglang_config_dir
from sglang_fastpath.models.folder import language_config, read_config, routed_experts
from sglang_fastpath.pins import BASE_VERSION
from sglang_fastpath.wheel.archive import MANIFEST


@dataclass
class GpuInfo:
    name: str
    capability: tuple[int, int]
    memory_bytes: int | None = None


@dataclass(frozen=True)
class MemoryQuestion:
    """What ``diagnose`` needs to split a GPU's memory between a target, its draft and their KV."""

    draft: Path | None = None
    gpu_memory_gib: float | None = None  # None: GPU 0's
    fractions: tuple[float, ...] = (0.6, 0.7, 0.8, 0.88)
    context_length: int | None = None
    kv_dtype: str = "auto"


@dataclass
class DoctorReport:
    facts: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def render(self) -> str:
        return "\n".join([*self.facts, *(f"WARNING: {w}" for w in self.warnings)])


def installed_sglang() -> tuple[str | None, dict | None]:
    """The installed SGLang version and the fork's manifest (None for stock SGLang)."""
    try:
        dist = metadata.distribution("sglang")
    except metadata.PackageNotFoundError:
        return None, None
    text = dist.read_text(MANIFEST)
    return dist.version, json.loads(text) if text else None


def gpus() -> list[GpuInfo] | None:
    """The visible CUDA GPUs, or None when torch is not importable."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return []
    return [GpuInfo(torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i),
                    torch.cuda.get_device_properties(i).total_memory)
            for i in range(torch.cuda.device_count())]


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def diagnose(model: Path | None = None, tp: int = 1, ep: int = 1, device_name: str | None = None,
             max_running_requests: int | None = None, cuda_graph_max_bs: int | None = None,
             nvlink: bool | None = None, memory: MemoryQuestion | None = None) -> DoctorReport:
    report = DoctorReport()
    draft = memory.draft if memory else None
    if model is not None:
        model, draft = memory_split.pair_folders(model, draft)
    version, manifest = installed_sglang()
    if version is None:
        report.warnings.append("sglang is not installed: install the fork's wheel or bundle (README)")
    elif manifest is None:
        report.facts.append(f"sglang {version}: stock, no fastpath patches applied")
        if version != BASE_VERSION:
            report.warnings.append(f"sglang {version} is not the pinned base {BASE_VERSION}; the series targets {BASE_VERSION}")
    else:
        names = [p["name"] for p in manifest["patches"]]
        report.facts.append(f"sglang {version}: fastpath on {manifest['base_version']}, {len(names)} patches applied")
        report.facts += [f"  patch {n}" for n in names]
    report.facts.append(f"torch {_package_version('torch') or 'not installed'}, triton {_package_version('triton') or 'not installed'}")
    found = gpus()
    if found is None:
        report.facts.append("GPU: unknown (torch not importable)")
    elif not found:
        report.facts.append("GPU: none visible to CUDA")
    for i, gpu in enumerate(found or []):
        report.facts.append(f"GPU {i}: {gpu.name}, compute capability {gpu.capability[0]}.{gpu.capability[1]}")
    name = device_name or (found[0].name if found else None)
    if tp > 2 and nvlink is False:
        report.warnings.append(
            f"TP={tp} over PCIe: SGLang disables custom all-reduce for more than 2 PCIe GPUs, so every "
            "all-reduce is NCCL; keep verify in-place (fastpath patches) and CUDA-graphed")
    if max_running_requests and cuda_graph_max_bs and cuda_graph_max_bs < max_running_requests:
        report.warnings.append(
            f"--cuda-graph-max-bs-decode {cuda_graph_max_bs} < --max-running-requests {max_running_requests}: "
            "verify runs eagerly for larger batches; raise --cuda-graph-max-bs-decode")
    if model is not None and memory is not None:
        _memory_section(report, model, draft, tp, memory, found, max_running_requests)
    config = read_config(model) if model is not None else None
    if config is not None and found:
        _marlin_section(report, config, found[0])
    if config is not None and not routed_experts(config):
        report.facts.append("MoE config: none needed (no routed experts)")
    elif config is not None:
        shape = moe_shape(config, tp, ep)
        if name is None:
            report.warnings.append("no GPU name (pass --device-name) : cannot resolve the MoE config file")
        else:
            triton_version = _package_version("triton") or "unknown"
            config_dir = sglang_config_dir()
            for down in (False, True):
                found_cfg = lookup(shape, name, triton_version, config_dir, down)
                report.facts.append(f"MoE config{' (down)' if down else ''}: {found_cfg.file_name}")
                report.facts.append(f"  -> {found_cfg.found or 'none'} ({found_cfg.how})")
                if found_cfg.found is None and not down:
                    report.warnings.append(
                        f"no tuned fused-MoE config for E={shape.experts},N={shape.n} on {name}: "
                        "SGLang uses its default (slow); set SGLANG_MOE_CONFIG_DIR to the fork's tuned configs")
            if shape.note:
                report.facts.append(f"  note: {shape.note}")
    return report


def _marlin_section(report: DoctorReport, config: dict, gpu: GpuInfo) -> None:
    """Whether the JIT cache holds the Marlin MoE kernel the model's quantized experts need on this GPU."""
    quant = (language_config(config).get("quantization_config") or config.get("quantization_config") or {})
    if not routed_experts(config) or quant.get("quant_method") not in jit_warm.MARLIN_QUANT_METHODS:
        return
    major, minor = gpu.capability
    built = jit_warm.built_for("marlin-moe", gpu.capability)
    if built:
        report.facts.append(f"JIT cache: Marlin MoE kernel for compute capability {major}.{minor} built "
                            f"({built[-1]})")
    else:
        report.warnings.append(
            f"the Marlin MoE kernel this model's {quant['quant_method']} experts run is not in the JIT cache "
            f"({jit_warm.cache_dir()}) for compute capability {major}.{minor}: the first server start compiles it "
            "with nvcc inside its first CUDA-graph capture (about 5 minutes, no log line); run "
            "'sglang-fastpath warm-jit' first, or install a bundle made with --jit-cache")


def _memory_section(report: DoctorReport, target: Path, draft: Path | None, tp: int, memory: MemoryQuestion,
                    found: list[GpuInfo] | None, max_running_requests: int | None) -> None:
    gpu_bytes = int(memory.gpu_memory_gib * memory_split.GIB) if memory.gpu_memory_gib else None
    if gpu_bytes is None and found:
        gpu_bytes = found[0].memory_bytes
    if gpu_bytes is None:
        report.warnings.append("no GPU memory size (pass --gpu-memory-gib): cannot split the memory")
        return
    sides = memory_split.sides(target, draft, tp, memory.kv_dtype)
    facts, warnings = memory_split.report_lines(sides, gpu_bytes, list(memory.fractions), tp,
                                                max_running_requests, memory.context_length)
    report.facts += facts
    report.warnings += warnings

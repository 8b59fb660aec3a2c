"""Which fused-MoE Triton config file SGLang 0.5.17 would load for a model, TP and GPU.

Mirrors the lookup order of ``sglang/srt/layers/moe/moe_runner/triton_utils``
(read, not imported, so it runs without torch or a GPU): the file name is
``E=..,N=..,device_name=..[,dtype=..][,block_shape=[bn, bk]][_down].json``, looked
up under ``$SGLANG_MOE_CONFIG_DIR`` (or the package) in ``configs/triton_<ver>/``,
then in the other triton folders newest first; a missing ``_down`` file reuses
the up file; otherwise SGLang falls back to its built-in default config.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sglang_fastpath.errors import FastpathError
from sglang_fastpath.models.folder import language_config, routed_experts

CONFIG_SUBDIR = ("srt", "layers", "moe", "moe_runner", "triton_utils")


@dataclass(frozen=True)
class MoeShape:
    experts: int  # experts per rank, as the kernel sees them
    n: int  # w2.shape[2] per rank (halved for packed int4)
    dtype: str | None  # "int4_w4a16", "fp8_w8a8" or None for bf16/fp16
    block_shape: tuple[int, int] | None
    note: str = ""


@dataclass(frozen=True)
class MoeLookup:
    file_name: str
    found: Path | None  # the file SGLang would read, or None (built-in default config)
    how: str


def moe_shape(config: dict, tp: int, ep: int = 1) -> MoeShape:
    """The (E, N, dtype) key of the fused-MoE config for a HF ``config.json`` at this TP/EP."""
    text = language_config(config)
    experts = routed_experts(config)
    inter = text.get("moe_intermediate_size") or text.get("intermediate_size")
    if not experts or not inter:
        raise FastpathError("the model config has no MoE experts (n_routed_experts / num_local_experts)")
    if tp % ep:
        raise FastpathError(f"--tp {tp} is not a multiple of --ep {ep}")
    moe_tp = tp // ep
    if experts % ep or inter % moe_tp:
        raise FastpathError(f"{experts} experts x {inter} intermediate do not split over tp={tp}, ep={ep}")
    local_e, local_i = experts // ep, inter // moe_tp
    quant = text.get("quantization_config") or config.get("quantization_config") or {}
    method = quant.get("quant_method", "")
    if method == "compressed-tensors":
        weights = [g.get("weights", {}) for g in quant.get("config_groups", {}).values()]
        if any(w.get("num_bits") == 4 for w in weights):
            return MoeShape(local_e, local_i // 2, "int4_w4a16", None,
                            "int4 experts: SGLang reads this file only with --moe-runner-backend triton "
                            "(the default on sm_90/sm_120 is Marlin, which uses no config file)")
    if method == "fp8":
        block = quant.get("weight_block_size")
        return MoeShape(local_e, local_i, "fp8_w8a8", tuple(block) if block else None)
    return MoeShape(local_e, local_i, None, None)


def config_file_name(shape: MoeShape, device_name: str, down: bool = False) -> str:
    name = f"E={shape.experts},N={shape.n},device_name={device_name.replace(' ', '_')}"
    if shape.dtype:
        name += f",dtype={shape.dtype}"
    if shape.block_shape and all(shape.block_shape):
        name += f",block_shape=[{shape.block_shape[0]}, {shape.block_shape[1]}]"
    return name + ("_down" if down else "") + ".json"


def sglang_config_dir() -> Path | None:
    """The folder SGLang reads configs from: $SGLANG_MOE_CONFIG_DIR, else the installed package's."""
    env = os.environ.get("SGLANG_MOE_CONFIG_DIR")
    if env:
        return Path(env)
    import importlib.util

    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]).joinpath(*CONFIG_SUBDIR)


def _version_key(folder: str) -> tuple[int, ...]:
    return tuple(int(x) for x in folder.removeprefix("triton_").split("_") if x.isdigit())


def lookup(shape: MoeShape, device_name: str, triton_version: str, config_dir: Path | None,
           down: bool = False) -> MoeLookup:
    name = config_file_name(shape, device_name, down)
    if config_dir is None or not (config_dir / "configs").is_dir():
        return MoeLookup(name, None, "no SGLang config folder found (is sglang installed?)")
    root = config_dir / "configs"
    own = f"triton_{triton_version.replace('.', '_')}"
    if (root / own / name).is_file():
        return MoeLookup(name, root / own / name, f"tuned for triton {triton_version}")
    others = sorted((d.name for d in root.glob("triton_*") if d.name != own), key=_version_key, reverse=True)
    for folder in others:
        if (root / folder / name).is_file():
            return MoeLookup(name, root / folder / name, f"fallback to {folder}: tuned for another triton")
    if down:
        up = lookup(shape, device_name, triton_version, config_dir, down=False)
        if up.found:
            return MoeLookup(name, up.found, "no _down file: reuses the up-projection config (no TMA)")
    return MoeLookup(name, None, "not found: SGLang uses its built-in default config (slow path)")



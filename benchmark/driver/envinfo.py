"""What a run records about where it ran: host, GPUs, git state, environment, variant sites.

Nothing here imports torch or SGLang: GPUs come from ``nvidia-smi`` and a site's
SGLang version from its ``sglang-*.dist-info/METADATA``.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

# Environment variables worth keeping with the results (prefix match); not PATH, whose
# entries are the machine's folders (the interpreter is recorded on its own).
ENV_PREFIXES = ("CUDA_", "NCCL_", "SGLANG_", "TORCH_", "TRITON_", "NVSHMEM_", "PYTHON", "HF_",
                "TRANSFORMERS_", "TOKENIZERS_", "OMP_", "LD_LIBRARY_PATH")


def gpu_inventory() -> list[dict[str, str]]:
    """One dict per GPU (index, name, memory, driver); empty without nvidia-smi."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4:
            gpus.append(dict(zip(("index", "name", "memory", "driver"), parts)))
    return gpus


def gpu_slug(gpus: list[dict[str, str]]) -> str:
    """``h200x2`` for two 'NVIDIA H200'; ``cpu`` without GPUs."""
    if not gpus:
        return "cpu"
    name = gpus[0]["name"].upper().replace("NVIDIA", "").replace("GEFORCE", "")
    tokens = [t for t in re.split(r"[^A-Z0-9]+", name) if t and t not in ("SXM", "PCIE", "HBM3", "HBM3E", "GB")]
    slug = "-".join(tokens[:3]).lower() or "gpu"
    return f"{slug}x{len(gpus)}" if len(gpus) > 1 else slug


def site_version(site: str | Path, package: str = "sglang") -> str | None:
    """The version of ``package`` installed in the site folder, read from its dist-info."""
    root = Path(site)
    for meta in sorted(root.glob(f"{package}-*.dist-info/METADATA")):
        for line in meta.read_text(errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return None


def git_state(repo: Path) -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                                  timeout=30, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    status = git("status", "--porcelain")
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None else None}


def env_snapshot(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environ`` named by ``ENV_PREFIXES``, sorted."""
    return {k: v for k, v in sorted(environ.items()) if k.startswith(ENV_PREFIXES)}


def host_info() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "python": sys.version.split()[0], "executable": sys.executable,
            "platform": platform.platform(), "cpus": os.cpu_count()}

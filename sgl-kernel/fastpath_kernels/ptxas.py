"""Registers and spills of a Triton kernel's PTX, from ``ptxas -v`` with the Triton wheel's own ptxas (no GPU).

One helper for every CPU cross-compile check (``moe_tuning.xcompile``, ``attention_tma.xcompile``, the verify
attention tests). Needs only ``triton``.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path


def ptxas_usage(ptx: str, arch: int) -> tuple[int, int]:
    """(registers, spill bytes: stores + loads) of ``ptx`` assembled for sm_<arch>."""
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

    # Triton 3.9's get_ptxas takes the arch; older wheels (the GPU hosts' 3.6) take none.
    ptxas = get_ptxas(arch) if "arch" in get_ptxas.__code__.co_varnames else get_ptxas()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        log = subprocess.run([ptxas.path, "-v", f"--gpu-name={sm_arch_from_capability(arch)}", str(src),
                              "-o", str(Path(tmp) / "k.cubin")], check=True, capture_output=True, text=True).stderr
    regs = re.search(r"Used (\d+) registers", log)
    return (int(regs[1]) if regs else 0), sum(int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", log))

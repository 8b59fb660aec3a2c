"""The signature and attributes a GPU launch would give a Triton or Gluon kernel, for a CPU cross-compile.

``triton.compile`` needs what the launcher derives from the arguments: each argument's type, the ints that a
launch specializes (0 and 1 strides become constexprs) and the 16-divisibility hints that let the compiler
vectorize and pipeline loads. One helper for ``attention_tma.xcompile`` and ``attention_ws.xcompile``, which
compile two kernels of one contract (patch 0032's MLA verify stage 1): ``mla_stage1_ints`` gives its int arguments,
and ``stub_torch_if_missing`` lets them run in a bare Triton venv.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable


def stub_torch_if_missing() -> None:
    """In a bare Triton venv (the GPU hosts' Triton, no torch), put a stand-in ``torch`` in ``sys.modules``: the kernel
    modules need torch only at call time, and ``torch.Tensor`` / ``torch.device`` in signatures."""
    try:
        import torch  # noqa: F401
    except ImportError:
        stub = types.ModuleType("torch")
        stub.Tensor = type("Tensor", (), {})
        stub.device = type("device", (), {})
        sys.modules["torch"] = stub


def launch_signature(arg_names: Iterable[str], pointers: dict[str, str], ints: dict[str, int],
                     constexprs: dict) -> tuple[dict[str, str], dict]:
    """(signature, attrs) for ``ASTSource``/``GluonASTSource``: ``pointers`` maps pointer and descriptor arguments to
    their types (``*bf16``; a pointer is marked 16-divisible), ``constexprs`` the constexpr values (strides of 0 or 1
    are added to it, as a launch specializes them), ``sm_scale`` is fp32 and every other argument an i32 from ``ints``."""
    signature: dict[str, str] = {}
    attrs: dict = {}
    for i, name in enumerate(arg_names):
        if name in pointers:
            signature[name] = pointers[name]
            if pointers[name].startswith("*"):
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif name in constexprs:
            signature[name] = "constexpr"
        elif name == "sm_scale":
            signature[name] = "fp32"
        elif ints[name] in (0, 1) and name.startswith("stride"):
            signature[name], constexprs[name] = "constexpr", ints[name]
        else:
            signature[name] = "i32"
            if ints[name] % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    return signature, attrs


def mla_stage1_ints(heads: int, max_splits: int, min_split_len: int) -> dict[str, int]:
    """The int arguments of an MLA verify stage 1 at Kimi's widths: contiguous q, draft K / V and cache rows of 576,
    partials ``[T, heads, max_splits, 512]`` (base-2 LSE ``[T, heads, max_splits]``) or, with one split, the output
    ``[T, heads, 512]`` itself."""
    direct, s = max_splits == 1, max_splits
    return {"stride_qt": heads * 576, "stride_qh": 576, "stride_ket": 576, "stride_vet": 576, "stride_kv": 576,
            "stride_ot": heads * 512 * (1 if direct else s), "stride_oh": 512 * (1 if direct else s),
            "stride_os": 0 if direct else 512, "stride_lt": 0 if direct else heads * s, "stride_lh": s,
            "num_heads": heads, "max_splits": max_splits, "min_split_len": min_split_len}

"""Patch 0022: ``FutureMap.stash`` writes the spec relay values with one fused scatter kernel.

``scatter_spec_extras`` (the inverse of 0.5.17's ``gather_spec_extras``) must write what the
per-buffer ``buf[indices] = value.to(buf.dtype)`` assignments write, and ``FutureMap.stash`` with
``SGLANG_ENABLE_FUSED_SPEC_STASH`` on must leave every relay buffer as with it off. Both run from the
patched tree under ``TRITON_INTERPRET=1`` in a child process (Triton picks interpreted or compiled at
its first import), on CPU tensors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from fastpath_fixtures import script_env
from sglang_trees import TreeImporter
from sglang_trees import trees  # noqa: F401 (a fixture)

KERNEL = "sglang.kernels.ops.speculative.scatter_spec_extras"
OVERLAP = "sglang.srt.managers.overlap_utils"
POOL, HIDDEN = 12, 40


def relay_values(bs: int, topk: int, seed: int) -> dict[str, torch.Tensor]:
    """One cycle's relay values, in the dtypes EAGLE hands to stash (bonus tokens int32)."""
    g = torch.Generator().manual_seed(seed)
    return {"topk_p": torch.rand(bs, topk, generator=g),
            "topk_index": torch.randint(0, 1000, (bs, topk), generator=g),
            "bonus_tokens": torch.randint(0, 1000, (bs,), generator=g, dtype=torch.int32),
            "hidden_states": torch.randn(bs, HIDDEN, generator=g).to(torch.bfloat16)}


def buffers(topk: int) -> dict[str, torch.Tensor]:
    return {"topk_p": torch.full((POOL, topk), -1.0), "topk_index": torch.full((POOL, topk), -1, dtype=torch.int64),
            "bonus_tokens": torch.full((POOL,), -1, dtype=torch.int64),
            "hidden_states": torch.full((POOL, HIDDEN), -1.0, dtype=torch.bfloat16)}


def _kernel_cases(mod) -> list[dict]:
    out = []
    for topk, bs, hidden in ((1, 1, True), (1, 5, True), (4, 3, True), (1, 4, False), (2, 0, True)):
        values, fused = relay_values(bs, topk, seed=bs + topk), buffers(topk)
        indices = torch.randperm(POOL, generator=torch.Generator().manual_seed(bs))[:bs]
        want = {k: b.clone() for k, b in fused.items()}
        for name in want if hidden else [k for k in want if k != "hidden_states"]:
            want[name][indices] = values[name].to(want[name].dtype)
        mod.scatter_spec_extras(indices, values["topk_p"], values["topk_index"], values["bonus_tokens"],
                                values["hidden_states"] if hidden else None, fused["topk_p"], fused["topk_index"],
                                fused["bonus_tokens"], fused["hidden_states"] if hidden else None)
        out.append({"case": [topk, bs, hidden], "equal": {k: torch.equal(fused[k], want[k]) for k in want}})
    try:
        b = buffers(1)
        mod.scatter_spec_extras(torch.tensor([1, 2]), torch.rand(3, 1), torch.zeros(2, 1, dtype=torch.int64),
                                torch.zeros(2), None, b["topk_p"], b["topk_index"], b["bonus_tokens"], None)
        out.append({"mismatch": "accepted"})
    except ValueError as exc:
        out.append({"mismatch": str(exc)})
    return out


class Spec:
    """The parts of SpeculativeAlgorithm FutureMap reads (EAGLE)."""

    def is_ngram(self) -> bool:
        return False

    def is_some(self) -> bool:
        return True

    def is_none(self) -> bool:
        return False

    def need_topk(self) -> bool:
        return True


def _stash_cases(overlap) -> list[dict]:
    """Two cycles stashed into one FutureMap with the switch on and one with it off: same buffers."""
    pool = SimpleNamespace(req_to_token=torch.zeros(POOL, 8, dtype=torch.int32))
    results = []
    for fused in (True, False):
        os.environ["SGLANG_ENABLE_FUSED_SPEC_STASH"] = "1" if fused else "0"
        fm = overlap.FutureMap(torch.device("cpu"), Spec(), pool, needs_cpu_seq_lens=False)
        for cycle, slots in enumerate(([3, 7, 1], [7, 0])):
            v = relay_values(len(slots), 1, seed=cycle)
            fm.stash(torch.tensor(slots), overlap.RelayPayload(
                bonus_tokens=v["bonus_tokens"], topk_p=v["topk_p"], topk_index=v["topk_index"],
                hidden_states=v["hidden_states"]))
        results.append({"fused_flag": fm.fused_stash, "bufs": [b[[0, 1, 3, 7]].float().tolist() for b in (
            fm.output_tokens_buf, fm.topk_p_buf, fm.topk_index_buf, fm.hidden_states_buf)]})
    return results


def _child(tree: str) -> None:
    mod = TreeImporter.module(Path(tree), KERNEL)
    assert type(mod._scatter_rows_kernel).__name__ == "InterpretedFunction"
    overlap = TreeImporter.module(Path(tree), OVERLAP)
    # stash's first call imports spec_need_hidden_states from spec_utils, whose imports need the GPU stack
    sys.modules.setdefault("sglang.srt.speculative.spec_utils", SimpleNamespace(spec_need_hidden_states=lambda: True))
    print(json.dumps({"kernel": _kernel_cases(mod), "stash": _stash_cases(overlap)}))


@pytest.fixture(scope="module")
def interpreted(trees) -> dict:  # noqa: F811
    done = subprocess.run([sys.executable, __file__, str(trees.patched)], env=script_env(TRITON_INTERPRET="1"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_scatter_writes_what_the_index_puts_write(interpreted: dict) -> None:
    cases = [c for c in interpreted["kernel"] if "case" in c]
    assert len(cases) == 5
    for case in cases:
        assert all(case["equal"].values()), case


def test_scatter_refuses_a_value_of_the_wrong_size(interpreted: dict) -> None:
    mismatch = interpreted["kernel"][-1]["mismatch"]
    assert "topk_p" in mismatch and "expected 2 rows of 1" in mismatch


def test_stash_with_the_switch_on_leaves_the_buffers_as_with_it_off(interpreted: dict) -> None:
    on, off = interpreted["stash"]
    assert on["fused_flag"] is True and off["fused_flag"] is False
    assert on["bufs"] == off["bufs"]


if __name__ == "__main__":
    _child(sys.argv[1])

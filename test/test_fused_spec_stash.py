"""Patch 0022: ``FutureMap.stash`` writes the spec relay values with one fused scatter kernel.

``scatter_spec_extras`` (the inverse of 0.5.17's ``gather_spec_extras``) must write what the
per-buffer ``buf[indices] = value.to(buf.dtype)`` assignments write, and ``FutureMap.stash`` with
``SGLANG_ENABLE_FUSED_SPEC_STASH`` on must leave every relay buffer as with it off, and with it on
must take the fused path for every payload that carries top-k values. Both run from each patched
tree under ``TRITON_INTERPRET=1`` in one child process (Triton picks interpreted or compiled at its
first import), on CPU tensors.

Every test runs on the patched 0.5.17 tree and on the patched 0.5.23 tree (upstream port 0020).
0.5.23's ``stash`` also takes payloads the fused path must leave to the eager writes, stashed here
on that tree only: a staging transition (bonus tokens alone), one without hidden states, and a bonus
the verify graph already scattered (``published_bonus``: nothing is written to the bonus buffer).
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
from sglang_trees import PATCHED, TreeImporter
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


def _cycles(tree_name: str) -> list[tuple[list[int], dict]]:
    """(slots, payload fields) of each stash; 0.5.23's extra kinds of payload on that tree only."""
    full = [(slots, relay_values(len(slots), 1, seed=cycle)) for cycle, slots in enumerate(([3, 7, 1], [7, 0]))]
    if tree_name == "patched":
        return full
    staging = {"bonus_tokens": relay_values(1, 1, seed=5)["bonus_tokens"]}
    no_hidden = {k: v for k, v in relay_values(2, 1, seed=6).items() if k != "hidden_states"}
    published = dict(relay_values(1, 1, seed=7), published=True)
    return [*full, ([1], staging), ([0, 3], no_hidden), ([3], published)]


def _stash_cases(overlap, tree_name: str) -> list[dict]:
    """The same stashes into one FutureMap with the switch on and one with it off: same buffers."""
    pool = SimpleNamespace(req_to_token=torch.zeros(POOL, 8, dtype=torch.int32))
    scatter, calls = overlap.scatter_spec_extras, []
    overlap.scatter_spec_extras = lambda *args: calls.append(1) or scatter(*args)
    results = []
    for fused in (True, False):
        os.environ["SGLANG_ENABLE_FUSED_SPEC_STASH"] = "1" if fused else "0"
        calls.clear()
        fm = overlap.FutureMap(torch.device("cpu"), Spec(), pool, needs_cpu_seq_lens=False)
        published_left = False
        for slots, v in _cycles(tree_name):
            payload = overlap.RelayPayload(**{k: t for k, t in v.items() if k != "published"})
            if v.get("published"):
                fm._relay = SimpleNamespace(published_bonus=payload.bonus_tokens)
            fm.stash(torch.tensor(slots), payload)
            if v.get("published"):
                published_left = fm._relay.published_bonus is not None  # stash clears it when it skips
                fm._relay = None
        bufs = (fm.output_tokens_buf, fm.topk_p_buf, fm.topk_index_buf, fm.hidden_states_buf)
        results.append({"fused_flag": fm.fused_stash, "scatter_calls": len(calls), "published_left": published_left,
                        "bufs": [b[[0, 1, 3, 7]].float().tolist() for b in bufs]})
    return results


def _child(tree_name: str, tree: str) -> dict:
    mod = TreeImporter.module(Path(tree), KERNEL)
    assert type(mod._scatter_rows_kernel).__name__ == "InterpretedFunction"
    overlap = TreeImporter.module(Path(tree), OVERLAP)
    # stash's first call imports spec_need_hidden_states from spec_utils, whose imports need the GPU stack
    sys.modules.setdefault("sglang.srt.speculative.spec_utils", SimpleNamespace(spec_need_hidden_states=lambda: True))
    return {"kernel": _kernel_cases(mod), "stash": _stash_cases(overlap, tree_name)}


@pytest.fixture(scope="module")
def interpreted(trees) -> dict[str, dict]:  # noqa: F811
    """Both trees in one interpreted child process."""
    args = [str(trees.get(name)) for name in PATCHED]
    done = subprocess.run([sys.executable, __file__, *args], env=script_env(TRITON_INTERPRET="1"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return dict(zip(PATCHED, json.loads(done.stdout.splitlines()[-1])))


@pytest.mark.parametrize("tree_name", PATCHED)
def test_scatter_writes_what_the_index_puts_write(interpreted: dict, tree_name: str) -> None:
    cases = [c for c in interpreted[tree_name]["kernel"] if "case" in c]
    assert len(cases) == 5
    for case in cases:
        assert all(case["equal"].values()), case


@pytest.mark.parametrize("tree_name", PATCHED)
def test_scatter_refuses_a_value_of_the_wrong_size(interpreted: dict, tree_name: str) -> None:
    mismatch = interpreted[tree_name]["kernel"][-1]["mismatch"]
    assert "topk_p" in mismatch and "expected 2 rows of 1" in mismatch


@pytest.mark.parametrize("tree_name", PATCHED)
def test_stash_with_the_switch_on_leaves_the_buffers_as_with_it_off(interpreted: dict, tree_name: str) -> None:
    on, off = interpreted[tree_name]["stash"]
    assert on["fused_flag"] is True and off["fused_flag"] is False
    assert on["bufs"] == off["bufs"]
    assert not on["published_left"] and not off["published_left"]


@pytest.mark.parametrize("tree_name", PATCHED)
def test_stash_fuses_every_payload_with_topk_values_and_only_with_the_switch(interpreted: dict,
                                                                              tree_name: str) -> None:
    # 0.5.23: the two full cycles and the one without hidden states; not the staging transition
    # (no top-k) nor the one whose bonus the verify graph already published.
    on, off = interpreted[tree_name]["stash"]
    assert on["scatter_calls"] == {"patched": 2, "upstream": 3}[tree_name]
    assert off["scatter_calls"] == 0


if __name__ == "__main__":
    print(json.dumps([_child(name, tree) for name, tree in zip(PATCHED, sys.argv[1:], strict=True)]))

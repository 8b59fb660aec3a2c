"""Patch 0007's verify kernel on a GPU at Kimi shapes (bf16), through the bench's own checks.

MLA 576/512 with 32 and 8 heads and GQA 128, pages 1/16/64, chain and tree masks, and a CUDA graph
replayed after its device metadata was rewritten for other context lengths: each output within 1e-2
(max relative) of a float32 torch reference. The kernel is rebuilt from the patch that creates it (0007 when written), so
this checks the committed patch whichever bundle is installed. Timing is benchmark/tools/attn_verify_bench.py's.
"""

from __future__ import annotations


import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def checks() -> dict[str, dict]:
    from benchmark.tools.attn_verify_bench import Kernels, load_verify_kernel, run_checks

    module, _ = load_verify_kernel()
    return {c["name"]: c for c in run_checks(Kernels(module), print)}


def test_every_kimi_shape_matches_the_float_reference(checks: dict[str, dict]) -> None:
    failed = {name: (c["rel_err"], c["nan"]) for name, c in checks.items() if not c["ok"]}
    assert not failed, failed


def test_graph_replay_on_new_lengths(checks: dict[str, dict]) -> None:
    c = checks["graph-replay-new-lengths"]
    assert c["captured_rel_err"] <= 1e-2 and c["replayed_rel_err"] <= 1e-2 and not c["nan"], c

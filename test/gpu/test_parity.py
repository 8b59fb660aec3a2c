"""Correctness gate: speculation must not change greedy output; the oracle must accept everything.

Each case is a real ``sglang.Engine`` in its own process (see engines.py). Greedy
token ids with EAGLE-3 (graph on and off) must equal those without speculation,
at TP 1 and 2, on the tiny pair and a 4-layer Llama-3-8B-shaped pair; on the
oracle pair, whose draft provably predicts the target, the accept length must
equal the number of draft tokens. The kimi pair (DeepSeek-V3 architecture at
Kimi-K2.5 widths, MLA and INT4 experts, oracle-wired) runs at TP 2 with graphs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from engines import SAMPLING, SPEC, Case, gpu_count, output_ids, run_case
from safetensors.torch import load_file

from sglang_fastpath.models.walk import chain_accept_lengths

pytestmark = pytest.mark.gpu
TPS = [pytest.param(tp, marks=pytest.mark.skipif(gpu_count() < tp, reason=f"needs {tp} GPUs")) for tp in (1, 2)]


@pytest.mark.parametrize("tp", TPS)
@pytest.mark.parametrize("family", ["tiny_models", "dense_models"])
def test_speculation_keeps_greedy_output(family: str, tp: int, request: pytest.FixtureRequest, engine_dir: Path) -> None:
    models = request.getfixturevalue(family)
    base = output_ids(run_case(Case(models, spec=False, tp=tp), engine_dir))
    for graph in (True, False):
        spec = run_case(Case(models, spec=True, cuda_graph=graph, tp=tp), engine_dir)
        assert output_ids(spec) == base, f"EAGLE-3 (cuda graph {graph}) changed greedy output at tp={tp}"
        assert all(len(ids) == SAMPLING["max_new_tokens"] for ids in output_ids(spec))


@pytest.mark.parametrize("graph", [True, False])
def test_oracle_accepts_every_draft_token(oracle_models: Path, graph: bool, engine_dir: Path) -> None:
    record = run_case(Case(oracle_models, spec=True, cuda_graph=graph), engine_dir)
    k = SPEC["speculative_num_draft_tokens"]
    for out in record["outputs"]:
        meta = out["meta_info"]
        # Every proposed draft token is correct; only the last verify may be cut by max_new_tokens.
        assert meta["spec_num_correct_drafts"] >= meta["spec_num_proposed_drafts"] - (k - 1), meta
        assert meta["spec_accept_length"] >= k - 0.2, meta
    base = output_ids(run_case(Case(oracle_models, spec=False), engine_dir))
    assert output_ids(record) == base


@pytest.mark.skipif(gpu_count() < 2, reason="needs 2 GPUs")
def test_kimi_speculation_keeps_greedy_output(kimi_models: Path, engine_dir: Path) -> None:
    base = output_ids(run_case(Case(kimi_models, spec=False, tp=2), engine_dir, timeout_s=600))
    record = run_case(Case(kimi_models, spec=True, tp=2), engine_dir, timeout_s=600)
    assert output_ids(record) == base, "EAGLE-3 changed greedy output on the kimi pair at tp=2"
    k = SPEC["speculative_num_draft_tokens"]
    assert all(o["meta_info"]["spec_accept_length"] >= k - 0.2 for o in record["outputs"]), record["outputs"]


IN_GRAPH = (("SGLANG_ENABLE_TRITON_METADATA_IN_GRAPH", "1"),)
EAGER_FILL = (("SGLANG_ENABLE_TRITON_METADATA_IN_GRAPH", "0"),)


@pytest.mark.parametrize("family", ["tiny_models", "dense_models"])
def test_metadata_filled_in_the_graph_keeps_greedy_output(family: str, request: pytest.FixtureRequest,
                                                         engine_dir: Path) -> None:
    """Patch 0017's switch (on by default): decode, verify and draft-extend graphs fill their own
    metadata; the baseline is plain decode with the eager fill."""
    models = request.getfixturevalue(family)
    base = output_ids(run_case(Case(models, spec=False, env=EAGER_FILL), engine_dir))
    assert output_ids(run_case(Case(models, spec=False, env=IN_GRAPH), engine_dir)) == base, \
        "decode with the metadata filled in the graph changed greedy output"
    spec = run_case(Case(models, spec=True, env=IN_GRAPH), engine_dir)
    assert output_ids(spec) == base, "EAGLE-3 with the metadata filled in the graph changed greedy output"


# Patches 0018 (the draft-extend graph picks the last accepted rows and their argmax) and 0020 (the
# draft graph fills its own kv indices and kv splits), both on by default: each alone, both, and
# neither (the eager paths they replace).
SELECT_OFF = (("SGLANG_ENABLE_DRAFT_EXTEND_SELECT_IN_GRAPH", "0"),)
DRAFT_METADATA_OFF = (("SGLANG_ENABLE_TRITON_DRAFT_METADATA_IN_GRAPH", "0"),)
DRAFT_SIDE = {"both": (), "select": DRAFT_METADATA_OFF, "draft-metadata": SELECT_OFF,
              "neither": SELECT_OFF + DRAFT_METADATA_OFF}


@pytest.mark.parametrize("switches", list(DRAFT_SIDE))
@pytest.mark.parametrize("family", ["tiny_models", "dense_models"])
def test_draft_side_graph_work_keeps_greedy_output(family: str, switches: str, request: pytest.FixtureRequest,
                                                   engine_dir: Path) -> None:
    models = request.getfixturevalue(family)
    base = output_ids(run_case(Case(models, spec=False), engine_dir))
    spec = run_case(Case(models, spec=True, env=DRAFT_SIDE[switches]), engine_dir)
    assert output_ids(spec) == base, f"EAGLE-3 with {switches} of the draft-side graph work changed greedy output"


ACCEPT_IN_GRAPH = (("SGLANG_ENABLE_VERIFY_ACCEPT_IN_GRAPH", "1"),)


@pytest.mark.parametrize("tp", TPS, ids=["tp1", "tp2"])
@pytest.mark.parametrize("family", ["tiny_models", "dense_models"], ids=["tiny", "dense"])
def test_verify_accept_in_graph_keeps_greedy_output(family: str, tp: int, request: pytest.FixtureRequest,
                                                    engine_dir: Path) -> None:
    """Patch 0021: the verify graph's own greedy acceptance gives the output of no speculation."""
    models = request.getfixturevalue(family)
    base = output_ids(run_case(Case(models, spec=False, tp=tp), engine_dir))
    spec = run_case(Case(models, spec=True, tp=tp, env=ACCEPT_IN_GRAPH), engine_dir)
    assert output_ids(spec) == base, f"EAGLE-3 with the acceptance in the verify graph changed greedy output at tp={tp}"


def _acceptance_predictor(models: Path) -> Callable[[int], list[int]]:
    """What each verify of a request must accept on a pair made with --draft-miss-rate (``walk.py``), from
    the request's first token."""
    tables = load_file(models / "oracle.safetensors")
    next_token, skip_tokens = tables["next_token"].tolist(), set(tables["walk"][tables["skips"]].tolist())
    return lambda first_token: chain_accept_lengths(next_token, skip_tokens, first_token,
                                                    SPEC["speculative_num_draft_tokens"], SAMPLING["max_new_tokens"])


ACCEPT_EAGER = (("SGLANG_ENABLE_VERIFY_ACCEPT_IN_GRAPH", "0"),)
FUSED_STASH = (("SGLANG_ENABLE_FUSED_SPEC_STASH", "1"),)
# 0023 (default on, so "defaults" and "no_cuda_graph" run it): the draft extend's attention on the grouped
# kernel; a wrong attention there changes the draft's hidden states, so its drafts, so the acceptance this test
# predicts from the walk. "draft_extend_prefill_kernel" keeps the path it replaced under test.
DRAFT_EXTEND_PREFILL_KERNEL = (("SGLANG_ENABLE_TRITON_GROUPED_DRAFT_EXTEND", "0"),)
# 0024 (default off): every graph runner captures on one stream, so captures reuse each other's freed pool
# blocks; a graph overwriting another's live output would change the drafts or the output here.
SHARED_CAPTURE_STREAM = (("SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM", "1"),)
# 0026 and 0027 (default off): the Triton graph runners alias their split-KV partials and, per role, their kv
# indices, and every verify graph packs the aux hidden states into one buffer; a runner reading another's indices,
# partials or aux states would change the drafts or the output here.
SHARED_GRAPH_MEMORY = (("SGLANG_TRITON_SHARED_GRAPH_STATE", "1"), ("SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN", "1"),
                       *SHARED_CAPTURE_STREAM)
# the prefill's piecewise graph is not under test here and its capture is half of a tiny engine's start-up
# (27.6 of 58 s on an H200, session 14)
NO_PREFILL_GRAPH = (("disable_prefill_cuda_graph", True),)
REAL_REJECTION = {"defaults": ((), True), "no_cuda_graph": ((), False), "accept_in_graph": (ACCEPT_IN_GRAPH, True),
                  "eager_paths": (EAGER_FILL + SELECT_OFF + DRAFT_METADATA_OFF + ACCEPT_EAGER, True),
                  "fused_stash": (FUSED_STASH, True),
                  "draft_extend_prefill_kernel": (DRAFT_EXTEND_PREFILL_KERNEL, True),
                  "shared_capture_stream": (SHARED_CAPTURE_STREAM, True),
                  "shared_graph_memory": (SHARED_GRAPH_MEMORY, True)}


@pytest.mark.parametrize("variant", list(REAL_REJECTION))
def test_rejected_drafts_keep_greedy_output_and_accept_what_the_walk_predicts(
        variant: str, missing_models: Path, engine_dir: Path) -> None:
    """A draft wrong at 30% of the walk: verify rejects for real (no SGLANG_SIMULATE_ACC_LEN), the output
    stays that of no speculation, and every request's verify count and accepted drafts are exactly what
    the walk predicts from its first token."""
    env, graph = REAL_REJECTION[variant]
    base = output_ids(run_case(Case(missing_models, spec=False, extra=NO_PREFILL_GRAPH), engine_dir))
    record = run_case(Case(missing_models, spec=True, cuda_graph=graph, env=env, extra=NO_PREFILL_GRAPH), engine_dir)
    assert output_ids(record) == base, f"EAGLE-3 ({variant}) changed greedy output under real rejection"
    predict, rejected = _acceptance_predictor(missing_models), 0
    for out in record["outputs"]:
        lengths, meta = predict(out["output_ids"][0]), out["meta_info"]
        assert meta["spec_verify_ct"] == len(lengths), (meta, lengths)
        assert meta["spec_num_correct_drafts"] == sum(n - 1 for n in lengths), (meta, lengths)
        rejected += sum(n < SPEC["speculative_num_draft_tokens"] for n in lengths)
    assert rejected >= 10, "the pair rejected too few drafts to test anything"

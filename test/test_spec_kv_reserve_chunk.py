"""The speculative KV reservation topped up in chunks at page size 1 (patch 0055, ``SGLANG_SPEC_KV_RESERVE_CHUNK``).

At page size 1 ``eagle_prepare_for_decode`` tops every request up to ``committed + reserve`` every cycle (as many
slots as the last verify committed), so every cycle pays the top-up's host work. With the switch at N the
reservation is rounded up to a whole chunk of N slots, as a page rounds it at larger page sizes: a request tops up
about once every N committed tokens, and (with patch 0054) the cycles in between skip the top-up. Checked on CPU,
with the tree's own functions: the top-up's cadence and the reservation it keeps, the next-decode estimate
(``ScheduleBatch._new_tokens_required_next_decode_spec_v2``) against what the next top-up allocates, the
``req_to_token`` row headroom (``get_req_to_token_extra_context_len``), and that the switch off changes nothing.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from sglang_trees import SHOWS_THE_BUG, TreeImporter, env_flag, load_defs, source, tree_defs
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_spec_topup_skip import COMMITTED, RESERVE, SIZING, Batch, Req, _prepare

SWITCH = "SGLANG_SPEC_KV_RESERVE_CHUNK"
BATCH = "sglang.srt.managers.schedule_batch"
TREES = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]
CHUNK, CYCLES = 16, 100


def _granule(tree, chunk: int):
    envs = SimpleNamespace(**{SWITCH: env_flag(chunk)})
    return tree_defs(tree, SIZING, ["get_spec_reserve_granule"], extra={"envs": envs})["get_spec_reserve_granule"]


def _run(tree, chunk: int, page_size: int = 1) -> tuple[list[int], list[Req]]:
    """Cycles of one committed token each: each top-up's slots; before each cycle the next-decode estimate is
    checked against what that cycle's top-up allocates."""
    granule = _granule(tree, chunk)
    calls: list[int] = []
    prepare = _prepare(tree, calls, granule)
    estimate = load_defs(source(tree, BATCH), ["ScheduleBatch._new_tokens_required_next_decode_spec_v2"], extra={
        "get_alloc_reserve_per_decode": lambda: RESERVE, "get_spec_reserve_granule": granule,
    })["ScheduleBatch._new_tokens_required_next_decode_spec_v2"]
    reqs = [Req(c) for c in COMMITTED]
    batch = Batch(reqs, page_size)
    for _ in range(CYCLES):
        needed = estimate(batch, reqs, page_size)
        before = len(calls)
        prepare(batch)
        assert sum(calls[before:]) == needed  # the estimate is what this top-up allocates
        for r in reqs:
            assert r.kv.kv_allocated_len >= r.kv_committed_len + RESERVE  # the reservation holds
            assert r.kv.kv_allocated_len < r.kv_committed_len + RESERVE + max(chunk, 1)
            r.kv.kv_committed_len += 1
    return calls, reqs


@pytest.mark.parametrize("tree_name", TREES)
def test_the_switch_exists_and_defaults_off(trees, monkeypatch, tree_name: str) -> None:
    monkeypatch.delenv(SWITCH, raising=False)
    envs = TreeImporter.module(trees.get(tree_name), "sglang.srt.environ").envs
    assert hasattr(envs, SWITCH) and getattr(envs, SWITCH).get() == 0
    monkeypatch.setenv(SWITCH, str(CHUNK))
    assert getattr(envs, SWITCH).get() == CHUNK


@pytest.mark.parametrize("tree_name", TREES)
def test_a_chunk_tops_up_once_every_chunk_tokens(trees, tree_name: str) -> None:
    calls, reqs = _run(trees.get(tree_name), CHUNK)
    assert all(n > 0 for n in calls)
    # One top-up for the first reservation, then one on each cycle where some request's committed + reserve
    # outgrows its last chunk: about CYCLES / CHUNK per request, not every cycle.
    crossing = {i for c in COMMITTED for i in range(1, CYCLES) if (c + i - 1 + RESERVE) % CHUNK == 0}
    assert len(calls) == 1 + len(crossing) <= 1 + len(COMMITTED) * (CYCLES // CHUNK + 1) < CYCLES // 4
    assert all(r.kv.kv_allocated_len % CHUNK == 0 for r in reqs)


@pytest.mark.parametrize("chunk", [0, 1])
def test_off_every_cycle_tops_up_as_before(trees, chunk: int) -> None:
    calls, reqs = _run(trees.get("patched"), chunk)
    assert calls == [len(COMMITTED) * RESERVE] + [len(COMMITTED)] * (CYCLES - 1)
    assert [r.kv.kv_allocated_len for r in reqs] == [c + CYCLES - 1 + RESERVE for c in COMMITTED]


@pytest.mark.parametrize("tree_name", TREES)
def test_the_row_keeps_headroom_for_a_chunk(trees, tree_name: str) -> None:
    tree = trees.get(tree_name)
    server_args = SimpleNamespace(speculative_algorithm="EAGLE3", page_size=1, max_speculative_num_draft_tokens=4)
    extra = {"get_alloc_reserve_per_decode": lambda server_args=None: RESERVE,
             "get_spec_reserve_granule": _granule(tree, CHUNK)}
    headroom = tree_defs(tree, SIZING, ["get_req_to_token_extra_context_len"], extra=extra)[
        "get_req_to_token_extra_context_len"](server_args)
    assert headroom >= RESERVE + CHUNK - 1

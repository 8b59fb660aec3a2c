"""A speculative decode cycle whose requests all still hold their KV reservation skips the top-up.

Patch 0054 (the 0.5.23 port: upstream 0031). ``eagle_prepare_for_decode`` tops every request up to ``committed +
reserve`` (rounded up to a page) before each cycle: it builds the current and next lengths as two CPU tensors,
copies both to the device and calls ``alloc_for_spec_decode``. At page size 64 a request needs a new page about once
every 64 committed tokens, so at small batch sizes most cycles allocate nothing and that host work (two tensors, two
H2D copies) changes nothing. With the patch the cycle returns before it when no request needs a slot; the lengths,
the reservation and ``decode_batch_idx`` come out as before. On CPU: the tree's function with
``alloc_for_spec_decode`` recorded, over a batch that commits one token a cycle (as an off or a rejected cycle does)
at page sizes 1 and 64.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

import pytest
import torch
from sglang_trees import PATCHED_AND_PRISTINE, load_defs, source, tree_defs
from sglang_trees import trees  # noqa: F401 (a fixture)

UTILS = "sglang.srt.speculative.eagle_utils"
SIZING = "sglang.srt.mem_cache.allocation_sizing"
RESERVE = 8  # get_alloc_reserve_per_decode() at K 4
COMMITTED = [100, 130, 190]


class Req:
    def __init__(self, committed: int) -> None:
        self.kv = SimpleNamespace(kv_allocated_len=committed, kv_committed_len=committed)
        self.decode_batch_idx = 0

    @property  # 0.5.17 reads it on the request, 0.5.23 on its kv
    def kv_committed_len(self) -> int:
        return self.kv.kv_committed_len


class Batch:
    def __init__(self, reqs: list[Req], page_size: int) -> None:
        self.reqs = reqs
        self.token_to_kv_pool_allocator = SimpleNamespace(page_size=page_size)
        self.sampling_info = SimpleNamespace(penalizer_orchestrator=SimpleNamespace(is_required=False))
        self.req_to_token_pool = SimpleNamespace(req_to_token=torch.zeros(len(reqs), 1024, dtype=torch.int32))
        self.req_pool_indices = torch.arange(len(reqs))
        self.device = "cpu"
        self.tree_cache = None
        self.seq_lens_cpu = None  # 0.5.23 then publishes max_seq_len_host

    def maybe_evict_swa(self) -> None:
        pass

    def batch_size(self) -> int:
        return len(self.reqs)


def _prepare(tree, calls: list[int], granule: Callable[[int], int] = lambda page_size: page_size
             ) -> Callable[[Batch], None]:
    """The tree's ``eagle_prepare_for_decode`` with ``alloc_for_spec_decode`` recorded into ``calls`` (each top-up's
    slots); ``granule`` stands for 0055's ``get_spec_reserve_granule`` (default: its switch off)."""

    def alloc_for_spec_decode(tree_cache, req_to_token_pool, *, reqs, nxt_kv_lens_cpu, num_needed_tokens, **_):
        calls.append(num_needed_tokens)
        for req, nxt in zip(reqs, nxt_kv_lens_cpu.tolist(), strict=True):
            req.kv.kv_allocated_len = max(req.kv.kv_allocated_len, nxt)

    extra = {
        "alloc_for_spec_decode": alloc_for_spec_decode,
        "get_alloc_reserve_per_decode": lambda: RESERVE,
        "get_spec": lambda: SimpleNamespace(speculative_eagle_topk=1),
        "get_spec_reserve_granule": granule,
    }
    if "def page_aligned_decode_alloc_lens(" in source(tree, SIZING).read_text():  # 0.5.23's helper, as it is
        extra.update(load_defs(source(tree, SIZING), ["page_aligned_decode_alloc_lens"]))
    return tree_defs(tree, UTILS, ["eagle_prepare_for_decode"], extra=extra)["eagle_prepare_for_decode"]


def _run(tree, page_size: int) -> tuple[list[int], list[bool]]:
    """Cycles of one committed token each: the top-up's calls, and for each cycle whether a request needed slots."""
    calls: list[int] = []
    prepare = _prepare(tree, calls)
    reqs = [Req(c) for c in COMMITTED]
    batch = Batch(reqs, page_size)
    needed = []
    for _ in range(CYCLES):
        before = [r.kv.kv_allocated_len for r in reqs]
        want = [-(-(r.kv_committed_len + RESERVE) // page_size) * page_size for r in reqs]
        needed.append(any(w > b for w, b in zip(want, before)))
        prepare(batch)
        assert [r.kv.kv_allocated_len for r in reqs] == [max(w, b) for w, b in zip(want, before)]
        if "def page_aligned_decode_alloc_lens(" in source(tree, SIZING).read_text():
            assert batch.max_seq_len_host == max(before)  # 0.5.23: the NPU gather's bound, skipped or not
        for r in reqs:
            r.kv.kv_committed_len += 1
    assert all(r.decode_batch_idx == CYCLES for r in reqs)
    return calls, needed


CYCLES = 200


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
def test_at_page_64_the_top_up_runs_only_where_a_request_needs_a_page(trees, tree_name: str) -> None:
    calls, needed = _run(trees.get(tree_name), 64)
    assert sum(needed) < CYCLES // 10  # a few pages in 200 tokens for 3 requests
    assert len(calls) == sum(needed) and all(n > 0 for n in calls), (len(calls), sum(needed))


@pytest.mark.parametrize("tree_name", ["patched", "upstream", "pristine", "upstream_pristine"])
def test_at_page_1_every_cycle_still_tops_up(trees, tree_name: str) -> None:
    calls, needed = _run(trees.get(tree_name), 1)
    assert all(needed) and calls == [len(COMMITTED) * RESERVE] + [len(COMMITTED)] * (CYCLES - 1)

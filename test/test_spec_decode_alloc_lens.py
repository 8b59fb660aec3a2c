"""Patch 0025: ``alloc_for_spec_decode`` reads the next KV lengths with one ``tolist()``, on CPU.

The function's definition is executed from each tree with the allocation and ``req_to_token`` writes
left out (``num_needed_tokens`` 0 skips them), on stand-in requests. Every request must end with
``max(old, next)`` as a Python int, and the CPU tensor of next lengths must be read once in bulk, not
once per request: pristine 0.5.17 reads ``int(nxt_kv_lens_cpu[i])`` per request (a select and an
``item()`` each, ~2 us apiece on the scheduler's host path of every EAGLE cycle); 0.5.23 already reads
the list once, so its pristine tree passes.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

import pytest
import torch
from sglang_trees import SHOWS_THE_BUG, load_defs, source
from sglang_trees import trees  # noqa: F401 (a fixture)

MODULE = "sglang.srt.mem_cache.allocation"
# what the function calls only when it allocates (0.5.23 adds the HiSparse path's names)
UNUSED = {name: None for name in ("alloc_token_slots", "get_last_loc", "ALLOC_EXTEND_FUNCS", "_device_type",
                                  "evict_from_tree_cache", "assign_req_to_token_pool_func")}


class CountingLens:
    """An int32 CPU tensor of next KV lengths that counts how it is read."""

    def __init__(self, values: list[int]) -> None:
        self.tensor = torch.tensor(values, dtype=torch.int32)
        self.element_reads = 0
        self.bulk_reads = 0

    def __getitem__(self, index: int) -> torch.Tensor:
        self.element_reads += 1
        return self.tensor[index]

    def tolist(self) -> list[int]:
        self.bulk_reads += 1
        return self.tensor.tolist()


def _alloc(trees, tree_name: str) -> Callable[..., None]:
    return load_defs(source(trees.get(tree_name), MODULE), ["alloc_for_spec_decode"], UNUSED)["alloc_for_spec_decode"]


def _run(alloc: Callable[..., None], allocated: list[int], nxt: CountingLens) -> list[Any]:
    reqs = [SimpleNamespace(kv=SimpleNamespace(kv_allocated_len=n)) for n in allocated]
    alloc(None, None, reqs=reqs, req_pool_indices=None, cur_kv_lens=None, cur_kv_lens_cpu=None,
          nxt_kv_lens=None, nxt_kv_lens_cpu=nxt, num_needed_tokens=0)
    return [r.kv.kv_allocated_len for r in reqs]


@pytest.mark.parametrize("tree_name", ["patched", "upstream", "upstream_pristine",
                                       pytest.param("pristine", marks=SHOWS_THE_BUG)])
def test_next_kv_lengths_are_read_once_in_bulk(trees, tree_name: str) -> None:
    nxt = CountingLens([40, 8, 72, 16])
    lens = _run(_alloc(trees, tree_name), [32, 24, 72, 0], nxt)
    assert lens == [40, 24, 72, 16] and all(type(n) is int for n in lens), lens
    assert (nxt.bulk_reads, nxt.element_reads) == (1, 0), (nxt.bulk_reads, nxt.element_reads)


@pytest.mark.parametrize("tree_name", ["patched", "upstream"])
def test_a_length_list_that_does_not_match_the_requests_is_an_error(trees, tree_name: str) -> None:
    with pytest.raises(ValueError):
        _run(_alloc(trees, tree_name), [32, 24], CountingLens([40, 8, 72]))

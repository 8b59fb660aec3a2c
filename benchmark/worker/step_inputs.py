"""The inputs of one measured step: a prefilled batch, then a decode or a verify step on it.

``prefill`` runs SGLang's own bench path (``sglang.benchmark.one_batch``: synthetic
requests, ScheduleBatch, one extend forward) for ``ctx + spare`` tokens per request,
so the KV slots at positions ctx .. ctx + spare - 1 are allocated and filled. A step
then rewinds each request to ``ctx`` tokens:

* decode: one new token per request at position ctx (SGLang's DECODE batch: seq_lens
  ctx + 1, out_cache_loc the slot of position ctx), ForwardBatch.init_new, forward;
* verify: an EagleVerifyInput of k draft tokens per request in a ``tree.draft_tree``
  with its FULL_MASK custom mask and positions, then SGLang's own
  ``eagle_prepare_for_verify`` (cache locations, ForwardBatch, graph load_batch) and
  forward, as ``run_eagle_verify`` does before sampling.

Every run writes the same KV slots again, so all runs see the same context. The timed
part is ForwardBatch construction plus the forward; sampling is not timed.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch
from sglang.benchmark import one_batch as ob
from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardBatch, ForwardMode
from sglang.srt.speculative.eagle_info import EagleVerifyInput
from sglang.srt.speculative.eagle_utils import eagle_prepare_for_verify
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

from benchmark.worker.tokens import token_ids
from benchmark.worker.tree import draft_tree


@dataclass
class Prefilled:
    batch: Any  # the ScheduleBatch the extend forward ran on
    bs: int
    ctx: int
    vocab: int
    seed: int


# One extend of every request at once overflows cuBLAS's 32-bit sizes in the dense MLP past ~58k tokens (kimi16's
# 36864-wide gate/up: CUBLAS_STATUS_EXECUTION_FAILED at bs 32 x 8k, 2026-12-04), so requests go in groups of at
# most this many tokens (at least one request a group) and the groups' batches are merged, as the scheduler merges
# a finished prefill into its running batch.
PREFILL_TOKENS_PER_EXTEND = 32768


def prefill_groups(bs: int, length: int) -> list[range]:
    """The request ranges ``prefill`` extends together: at most PREFILL_TOKENS_PER_EXTEND tokens, one request at least."""
    per = max(1, PREFILL_TOKENS_PER_EXTEND // length)
    return [range(start, min(bs, start + per)) for start in range(0, bs, per)]


def prefill(bench_runner: Any, *, bs: int, ctx: int, spare: int, vocab: int, seed: int) -> Prefilled:
    """Free the pools, then prefill ``bs`` requests of ``ctx + spare`` tokens (in groups; see prefill_groups)."""
    bench_runner.clear()
    reqs = ob.prepare_synthetic_inputs_for_latency_test(bs, ctx + spare, token_ids(bs, ctx + spare, vocab, seed))
    batch = None
    for group in prefill_groups(bs, ctx + spare):
        _next_ids, _logits, part = bench_runner.extend(reqs[group.start:group.stop])
        if batch is None:
            batch = part
        else:
            batch.merge_batch(part)
    bench_runner.synchronize()
    return Prefilled(batch, bs, ctx, vocab, seed)


class _Rewound:
    """Puts the batch back to ``length`` tokens per request before each run."""

    def __init__(self, mr: Any, pre: Prefilled, length: int) -> None:
        self.mr, self.pre, self.batch = mr, pre, pre.batch
        b = pre.batch
        self.seq_lens = b.seq_lens.new_full((pre.bs,), length)
        self.seq_lens_cpu = torch.full((pre.bs,), length, dtype=torch.int64)
        self.orig_seq_lens = b.orig_seq_lens.new_full((pre.bs,), length)
        self.seq_lens_sum = pre.bs * length

    def _rewind(self) -> None:
        b = self.batch
        b.forward_mode = ForwardMode.DECODE
        b.seq_lens, b.seq_lens_cpu, b.orig_seq_lens = self.seq_lens, self.seq_lens_cpu, self.orig_seq_lens
        b.seq_lens_sum = self.seq_lens_sum
        b.input_embeds = None
        b.return_logprob = False


class DecodeStep(_Rewound):
    def __init__(self, mr: Any, pre: Prefilled) -> None:
        super().__init__(mr, pre, pre.ctx + 1)
        device = pre.batch.seq_lens.device
        slots = mr.req_to_token_pool.req_to_token[pre.batch.req_pool_indices, pre.ctx]
        self.out_cache_loc = slots.to(torch.int64)
        ids = token_ids(1, pre.bs, pre.vocab, pre.seed + 1)[0]
        self.input_ids = torch.tensor(ids, dtype=torch.int64, device=device)

    def reset(self) -> None:
        self._rewind()
        b = self.batch
        b.spec_algorithm, b.spec_info = SpeculativeAlgorithm.NONE, None
        b.input_ids, b.out_cache_loc = self.input_ids, self.out_cache_loc

    def run(self) -> bool:
        fb = ForwardBatch.init_new(self.batch, self.mr, return_hidden_states_before_norm=False)
        return bool(self.mr.forward(fb).can_run_graph)


class VerifyStep(_Rewound):
    def __init__(self, mr: Any, pre: Prefilled, *, k: int, topk: int) -> None:
        super().__init__(mr, pre, pre.ctx)
        device = pre.batch.seq_lens.device
        tree = draft_tree(k, topk)
        bs, ctx = pre.bs, pre.ctx

        def per_request(values: list, dtype: torch.dtype) -> torch.Tensor:
            return torch.tensor(values, dtype=dtype, device=device).repeat(bs)

        ids = token_ids(1, bs * k, pre.vocab, pre.seed + 2)[0]
        self.verify_input = EagleVerifyInput(
            draft_token=torch.tensor(ids, dtype=torch.int64, device=device),
            custom_mask=per_request(tree.flat_mask(ctx), torch.bool),
            positions=per_request([ctx + d for d in tree.depths], torch.int64),
            retrieve_index=torch.arange(bs * k, dtype=torch.int64, device=device).view(bs, k),
            retrieve_next_token=per_request(tree.next_token(), torch.int64).view(bs, k),
            retrieve_next_sibling=per_request(tree.next_sibling(), torch.int64).view(bs, k),
            retrieve_cum_len=None,
            spec_steps=max(1, tree.max_depth),
            topk=topk,
            draft_token_num=k,
            capture_hidden_mode=CaptureHiddenMode.FULL,
            seq_lens_sum=None,
            seq_lens_cpu=None,
        )
        self.target_worker = SimpleNamespace(model_runner=mr)

    def reset(self) -> None:
        self._rewind()
        b = self.batch
        b.spec_algorithm, b.spec_info = self.mr.spec_algorithm, self.verify_input
        b.input_ids, b.out_cache_loc = None, None

    def run(self) -> bool:
        fb, _planned = eagle_prepare_for_verify(self.verify_input, self.mr.req_to_token_pool, self.batch,
                                                self.target_worker)
        return bool(self.mr.forward(fb).can_run_graph)

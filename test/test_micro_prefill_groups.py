"""The micro worker prefills long contexts in groups of requests and merges their batches
(benchmark/worker/step_inputs.py): one extend of bs 32 x 8k tokens failed in cuBLAS on kimi16. Runs on CPU with
stand-in ``sglang`` modules; the real ``ScheduleBatch.merge_batch`` is what the scheduler uses on every prefill."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

import pytest

STAND_INS = ("sglang", "sglang.benchmark", "sglang.benchmark.one_batch", "sglang.srt",
             "sglang.srt.model_executor", "sglang.srt.model_executor.forward_batch_info", "sglang.srt.speculative",
             "sglang.srt.speculative.eagle_info", "sglang.srt.speculative.eagle_utils",
             "sglang.srt.speculative.spec_info")


class _Batch:
    def __init__(self, reqs: list[Any]) -> None:
        self.reqs = list(reqs)
        self.merged = 0

    def merge_batch(self, other: "_Batch") -> None:
        self.reqs += other.reqs
        self.merged += 1


class _Runner:
    def __init__(self) -> None:
        self.extends: list[int] = []
        self.cleared = self.synced = 0

    def clear(self) -> None:
        self.cleared += 1

    def extend(self, reqs: list[Any]) -> tuple[None, None, _Batch]:
        assert self.cleared == 1 and not self.synced, "extends run after clear and before the one synchronize"
        self.extends.append(len(reqs))
        return None, None, _Batch(reqs)

    def synchronize(self) -> None:
        self.synced += 1


@pytest.fixture
def step_inputs(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    for name in STAND_INS:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    one_batch = sys.modules["sglang.benchmark.one_batch"]
    one_batch.prepare_synthetic_inputs_for_latency_test = lambda bs, length, ids: [(i, len(ids[i])) for i in range(bs)]
    info = sys.modules["sglang.srt.model_executor.forward_batch_info"]
    info.CaptureHiddenMode = info.ForwardBatch = info.ForwardMode = object
    sys.modules["sglang.srt.speculative.eagle_info"].EagleVerifyInput = object
    sys.modules["sglang.srt.speculative.eagle_utils"].eagle_prepare_for_verify = object
    sys.modules["sglang.srt.speculative.spec_info"].SpeculativeAlgorithm = object
    monkeypatch.delitem(sys.modules, "benchmark.worker.step_inputs", raising=False)
    return importlib.import_module("benchmark.worker.step_inputs")


@pytest.mark.parametrize("bs,ctx,extends", [
    (1, 128, [1]),  # short prompts: one extend, as before
    (64, 128, [64]),
    (32, 8192, [3] * 10 + [2]),  # 8196 tokens a request: three a group
    (1, 32768, [1]),  # a request longer than the cap still goes alone
    (3, 40000, [1, 1, 1]),
])
def test_prefill_extends_in_capped_groups_and_merges_them_in_order(step_inputs: Any, bs: int, ctx: int,
                                                                    extends: list[int]) -> None:
    runner = _Runner()
    pre = step_inputs.prefill(runner, bs=bs, ctx=ctx, spare=4, vocab=1000, seed=7)
    assert runner.extends == extends and runner.cleared == 1 and runner.synced == 1
    assert [r[0] for r in pre.batch.reqs] == list(range(bs)), "the merged batch keeps the requests' order"
    assert all(r[1] == ctx + 4 for r in pre.batch.reqs) and pre.batch.merged == len(extends) - 1
    cap = step_inputs.PREFILL_TOKENS_PER_EXTEND
    assert all(n == 1 or n * (ctx + 4) <= cap for n in extends)

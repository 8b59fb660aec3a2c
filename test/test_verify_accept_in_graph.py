"""Patch 0021: greedy top-1 acceptance recorded inside the target-verify CUDA graph.

``EagleGreedyVerifyEpilogue.capture_hook`` adds, to every TARGET_VERIFY graph the target runner
captures, the argmax of the logits and ``greedy_chain_accept`` (a Triton kernel) writing what
``verify_tree_greedy`` gives on a top-1 chain into one int32 buffer per draft width. After a replay,
``run_eagle_verify`` reads a copy of it (``read``) for batches that sample greedily from the raw
logits and passes it to ``eagle_sample`` as ``greedy_accept``.

* The kernel runs under ``TRITON_INTERPRET=1`` in a child process (Triton picks interpreted or
  compiled at its first import) against a reference written from ``VerifyTreeGreedy``'s CUDA
  source (sgl-kernel ``csrc/speculative/eagle_utils.cu``): for every width K 1..8 and every number
  of matching drafts, with the rows past the batch left as they were.
* The hook and ``read`` run on CPU tensors, the kernel replaced by the reference; a fake clock of
  "capturing" says whether a call is the warmup or the capture.
* ``eagle_sample`` runs from the patched tree with stand-ins for its distributed, penalty and probe
  imports; with ``greedy_accept`` it must return what its own greedy branch returns, also under
  ``SGLANG_SIMULATE_ACC_LEN`` (both token modes).

Every test runs on the patched 0.5.17 tree and on the patched 0.5.23 tree (upstream port 0018).
The port's kernel leaves out the bonus token: 0.5.23's ``run_eagle_verify`` takes it, with the new
sequence lengths, from one fused kernel (``prepare_verify_commit_outputs``) after ``eagle_sample``
either way. It also declines watermarked batches (0.5.23's ``eagle_sample`` forces their tokens into
the logits before the argmax).
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from fastpath_fixtures import script_env
from sglang_trees import PATCHED, load_defs, source
from sglang_trees import trees  # noqa: F401 (a fixture)

KERNEL = "sglang.kernels.ops.speculative.greedy_chain_accept"
EPILOGUE = "sglang.srt.speculative.eagle_verify_epilogue"
UTILS = "sglang.srt.speculative.eagle_utils"
SPEC_UTILS = "sglang.srt.speculative.spec_utils"
WIDTHS = [1, 2, 3, 4, 6, 8]
MAX_BS, VOCAB = 9, 50
POISON = -7
# The per-request fields after the three MAX_BS * K regions, in each tree's packed layout.
TAIL = {"patched": ["accept_lens", "bonus", "num_correct_drafts"], "upstream": ["accept_lens", "num_correct_drafts"]}


def reference(candidates: torch.Tensor, target_predict: torch.Tensor) -> dict[str, list]:
    """VerifyTreeGreedy on a chain (retrieve_index i*K+j, next token j+1, no siblings), as plain lists:
    node j is accepted while each draft token equals the target's argmax at the node before it."""
    bs, k = candidates.shape
    tgt = target_predict.flatten().tolist()
    predict, accept_index, accept_lens, bonus, correct = [0] * (bs * k), [], [], [], []
    for i in range(bs):
        last, row, n = i * k, [i * k], 0
        for j in range(1, k):
            if int(candidates[i, j]) != tgt[last]:
                break
            predict[last] = tgt[last]
            n += 1
            last = i * k + j
            row.append(last)
        predict[last] = tgt[last]
        accept_index.append(row + [-1] * (k - len(row)))
        accept_lens.append(n + 1)
        bonus.append(tgt[last])
        correct.append(n)
    return {"predict": predict, "accept_index": accept_index, "accept_lens": accept_lens, "bonus": bonus,
            "num_correct_drafts": correct, "target_predict": target_predict.tolist()}


def chain_problem(bs: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Draft chains whose first m drafts match the target, m cycling over 0..K-1 across the rows."""
    g = torch.Generator().manual_seed(seed)
    target = torch.randint(0, VOCAB, (bs, k), generator=g)
    cand = torch.randint(0, VOCAB, (bs, k), generator=g)
    for i in range(bs):
        m = i % k
        cand[i, 1:m + 1] = target[i, :m]
        if m + 1 < k:
            cand[i, m + 1] = (target[i, m] + 1) % VOCAB  # the first draft the target rejects
    return cand, target


def kernel_defs(tree: Path) -> dict:
    names = ["_greedy_chain_accept_kernel", "greedy_chain_accept_into", "greedy_chain_accept_size",
             "read_greedy_chain_accept"]
    return load_defs(source(tree, KERNEL), names, extra={"next_power_of_2": lambda n: 1 << (n - 1).bit_length()})


def unpack(defs: dict, packed: torch.Tensor, bs: int, k: int, tail: list[str]) -> dict[str, list]:
    predict, accept_index, target_predict, *rest = defs["read_greedy_chain_accept"](packed, bs, k, MAX_BS)
    assert len(rest) == len(tail)
    return {"predict": predict.tolist(), "accept_index": accept_index.tolist(),
            "target_predict": target_predict.tolist(), **{name: t.tolist() for name, t in zip(tail, rest)}}


def expected(cand: torch.Tensor, target: torch.Tensor, tail: list[str]) -> dict[str, list]:
    want = reference(cand, target)
    return {name: want[name] for name in ["predict", "accept_index", "target_predict", *tail]}


def _child(tree: str, tail: list[str]) -> list[dict]:
    """In the TRITON_INTERPRET=1 process: the kernel on every width, results as plain data."""
    defs = kernel_defs(Path(tree))
    assert type(defs["_greedy_chain_accept_kernel"]).__name__ == "InterpretedFunction"
    out = []
    for k in WIDTHS:
        bs = MAX_BS - 2  # rows bs.. of every region must stay as they were
        cand, target = chain_problem(bs, k, seed=k)
        size = defs["greedy_chain_accept_size"](MAX_BS, k)
        packed = torch.full((size,), POISON, dtype=torch.int32)
        defs["greedy_chain_accept_into"](packed, cand, target, MAX_BS)
        got = unpack(defs, packed, bs, k, tail)
        written = torch.zeros_like(packed, dtype=torch.bool)
        region = MAX_BS * k
        for start in (0, region, 2 * region):
            written[start:start + bs * k] = True
        for n in range(len(tail)):
            written[3 * region + n * MAX_BS:3 * region + n * MAX_BS + bs] = True
        out.append({"k": k, "got": got, "want": expected(cand, target, tail), "size": size,
                    "layout_size": 3 * region + len(tail) * MAX_BS,
                    "untouched": bool((packed[~written] == POISON).all())})
    return out


@pytest.fixture(scope="module")
def interpreted(trees) -> dict[str, list[dict]]:  # noqa: F811
    """Both trees' kernels in one interpreted child process."""
    args = [str(trees.get(name)) for name in PATCHED]
    done = subprocess.run([sys.executable, __file__, *args], env=script_env(TRITON_INTERPRET="1"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return dict(zip(PATCHED, json.loads(done.stdout.splitlines()[-1])))


def test_reference_is_verify_tree_greedy_on_a_chain() -> None:
    # Hand-worked: row 0 accepts both drafts, row 1 the first only, row 2 none.
    cand = torch.tensor([[9, 1, 2], [9, 1, 5], [9, 4, 2]])
    target = torch.tensor([[1, 2, 3], [1, 7, 8], [3, 4, 5]])
    want = reference(cand, target)
    assert want["accept_lens"] == [3, 2, 1] and want["bonus"] == [3, 7, 3]
    assert want["accept_index"] == [[0, 1, 2], [3, 4, -1], [6, -1, -1]]
    assert want["predict"] == [1, 2, 3, 1, 7, 0, 3, 0, 0]


@pytest.mark.parametrize("tree_name", PATCHED)
@pytest.mark.parametrize("k", WIDTHS)
def test_kernel_gives_verify_tree_greedy_result(interpreted: dict[str, list[dict]], tree_name: str, k: int) -> None:
    case = next(c for c in interpreted[tree_name] if c["k"] == k)
    assert case["got"] == case["want"]
    assert case["size"] == case["layout_size"], "the buffer is not exactly the packed fields"
    assert case["untouched"], "the kernel wrote past the batch's rows"


# ---- the hook and read(), on CPU tensors with the reference in place of the kernel


class Mode:
    TARGET_VERIFY = "target_verify"
    DECODE = "decode"


def reference_into(tail: list[str]):
    def into(out: torch.Tensor, candidates: torch.Tensor, target_predict: torch.Tensor, max_bs: int) -> None:
        bs, k = candidates.shape
        r = reference(candidates, target_predict)
        region = max_bs * k
        out[:bs * k] = torch.tensor(r["predict"], dtype=torch.int32)
        out[region:region + bs * k] = torch.tensor(r["accept_index"], dtype=torch.int32).flatten()
        out[2 * region:2 * region + bs * k] = target_predict.flatten().to(torch.int32)
        for n, field in enumerate(tail):
            start = 3 * region + n * max_bs
            out[start:start + bs] = torch.tensor(r[field], dtype=torch.int32)
    return into


@pytest.fixture(params=PATCHED)
def epilogue_cls(trees, request):  # noqa: F811
    """(EagleGreedyVerifyEpilogue of one tree, its envs stand-in, that tree's tail fields)."""
    tree, tail = trees.get(request.param), TAIL[request.param]
    kdefs = kernel_defs(tree)
    envs = SimpleNamespace(SGLANG_SANITIZE_NAN_LOGITS=SimpleNamespace(get=lambda: False))
    defs = load_defs(source(tree, EPILOGUE), ["GreedyChainAccept", "EagleGreedyVerifyEpilogue",
                                              "_greedy_on_raw_logits"],
                     extra={"greedy_chain_accept_into": reference_into(tail), "ForwardMode": Mode, "envs": envs,
                            "greedy_chain_accept_size": kdefs["greedy_chain_accept_size"],
                            "read_greedy_chain_accept": kdefs["read_greedy_chain_accept"],
                            "LogitsProcessorOutput": SimpleNamespace})
    return defs["EagleGreedyVerifyEpilogue"], envs, tail


def verify_runner(**changes) -> SimpleNamespace:
    fields = dict(model_runner=SimpleNamespace(is_draft_worker=False), capture_forward_mode=Mode.TARGET_VERIFY,
                  ragged_verify_mode=False, require_gathered_buffer=False, bs=4)
    return SimpleNamespace(**{**fields, **changes})


def capture(epi, runner, bs: int, k: int, monkeypatch, *, capturing: bool, seed: int = 0):
    """One run of the captured forward's tail: logits whose argmax is the target chain."""
    cand, target = chain_problem(bs, k, seed)
    logits = torch.randn(bs * k, VOCAB)
    logits[torch.arange(bs * k), target.flatten()] = 10.0
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing)
    epi.capture_hook(runner, SimpleNamespace(next_token_logits=logits), SimpleNamespace(
        batch_size=bs, input_ids=cand.flatten()), bs * k)
    return cand, target


def greedy_batch(raw_bs: int, **changes) -> SimpleNamespace:
    info = dict(is_all_greedy=True, acc_additive_penalties=None, acc_scaling_penalties=None, logit_bias=None,
                has_watermark_candidates=False)  # (0.5.17 has no watermark)
    info.update(changes.pop("info", {}))
    return SimpleNamespace(sampling_info=SimpleNamespace(**info), has_grammar=changes.pop("has_grammar", False),
                           seq_lens=torch.zeros(raw_bs, dtype=torch.int64))


def test_hook_records_the_acceptance_of_target_verify_captures(epilogue_cls, monkeypatch) -> None:
    cls, _, tail = epilogue_cls
    epi = cls(max_bs=MAX_BS)
    runner = verify_runner()
    capture(epi, runner, 4, 4, monkeypatch, capturing=False)  # warmup: allocates, records nothing
    assert epi._captured == set() and 4 in epi._packed
    cand, target = capture(epi, runner, 4, 4, monkeypatch, capturing=True)
    assert epi._captured == {(4, 4)}
    got = epi.read(runner, greedy_batch(3), SimpleNamespace(draft_token_num=4))
    want = reference(cand[:3], target[:3])
    assert got.predict.tolist() == want["predict"] and got.accept_index.tolist() == want["accept_index"]
    assert got.accept_lens.tolist() == want["accept_lens"]
    if "bonus" in tail:
        assert got.bonus_tokens.tolist() == want["bonus"]
    assert got.num_correct_drafts.tolist() == want["num_correct_drafts"]
    assert got.target_predict.tolist() == target[:3].tolist()
    epi._packed[4].fill_(POISON)  # the next replay rewrites the buffer: what read() returned is a copy
    assert got.accept_lens.tolist() == want["accept_lens"]


@pytest.mark.parametrize("change", [dict(model_runner=SimpleNamespace(is_draft_worker=True)),
                                    dict(capture_forward_mode=Mode.DECODE), dict(ragged_verify_mode=True),
                                    dict(require_gathered_buffer=True)],
                         ids=["draft-worker", "decode", "ragged", "gathered"])
def test_hook_leaves_other_graphs_alone(epilogue_cls, monkeypatch, change: dict) -> None:
    cls, _, _ = epilogue_cls
    epi = cls(max_bs=MAX_BS)
    for capturing in (False, True):
        capture(epi, verify_runner(**change), 4, 4, monkeypatch, capturing=capturing)
    assert epi._captured == set() and epi._packed == {}


def test_hook_allocates_only_outside_the_capture(epilogue_cls, monkeypatch) -> None:
    cls, _, _ = epilogue_cls
    epi = cls(max_bs=MAX_BS)
    capture(epi, verify_runner(), 4, 4, monkeypatch, capturing=True)  # no warmup first: no buffer to write
    capture(epi, verify_runner(), MAX_BS + 1, 4, monkeypatch, capturing=False)  # past max_bs
    assert epi._captured == set() and epi._packed == {}


@pytest.mark.parametrize("batch", [
    greedy_batch(3, info=dict(is_all_greedy=False)), greedy_batch(3, has_grammar=True),
    greedy_batch(3, info=dict(acc_additive_penalties=torch.zeros(3, 1))),
    greedy_batch(3, info=dict(acc_scaling_penalties=torch.ones(3, 1))),
    greedy_batch(3, info=dict(logit_bias=torch.zeros(3, VOCAB))),
], ids=["sampling", "grammar", "additive-penalty", "scaling-penalty", "logit-bias"])
def test_read_declines_batches_that_change_the_logits(epilogue_cls, monkeypatch, batch) -> None:
    cls, _, _ = epilogue_cls
    epi = cls(max_bs=MAX_BS)
    for capturing in (False, True):
        capture(epi, verify_runner(), 4, 4, monkeypatch, capturing=capturing)
    assert epi.read(verify_runner(), greedy_batch(3), SimpleNamespace(draft_token_num=4)) is not None
    assert epi.read(verify_runner(), batch, SimpleNamespace(draft_token_num=4)) is None


@pytest.mark.parametrize("epilogue_cls", ["upstream"], indirect=True)
def test_read_declines_watermarked_batches_on_0523(epilogue_cls, monkeypatch) -> None:
    """0.5.23's eagle_sample forces a watermarked batch's tokens into the logits before its argmax."""
    cls, _, _ = epilogue_cls
    epi = cls(max_bs=MAX_BS)
    for capturing in (False, True):
        capture(epi, verify_runner(), 4, 4, monkeypatch, capturing=capturing)
    batch = greedy_batch(3, info=dict(has_watermark_candidates=True))
    assert epi.read(verify_runner(), batch, SimpleNamespace(draft_token_num=4)) is None


def test_read_declines_graphs_without_the_epilogue(epilogue_cls, monkeypatch) -> None:
    cls, envs, _ = epilogue_cls
    epi = cls(max_bs=MAX_BS)
    for capturing in (False, True):
        capture(epi, verify_runner(), 4, 4, monkeypatch, capturing=capturing)
    assert epi.read(verify_runner(bs=8), greedy_batch(5), SimpleNamespace(draft_token_num=4)) is None  # other bs
    assert epi.read(verify_runner(), greedy_batch(3), SimpleNamespace(draft_token_num=3)) is None  # other width
    monkeypatch.setattr(envs, "SGLANG_SANITIZE_NAN_LOGITS", SimpleNamespace(get=lambda: True))
    assert epi.read(verify_runner(), greedy_batch(3), SimpleNamespace(draft_token_num=4)) is None


# ---- eagle_sample with and without the in-graph result


def _module(name: str, **attrs) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    return mod


# What differs between the trees' eagle_sample and simulation helpers: 0.5.23 renamed the length
# sampler, has a CUDA kernel for the simulation (not taken on CPU tensors), imports its sampling
# kernels at module level and asks get_spec() about rejection sampling before its greedy branch.
SIM_SAMPLER = {"patched": "_sample_simulated_acc_len", "upstream": "sample_simulated_acc_len"}
NO_SPEC = SimpleNamespace(speculative_use_rejection_sampling=False)
UPSTREAM_SAMPLE_EXTRA = {name: None for name in [
    "chain_speculative_sampling_triton", "partial", "sampling_softmax", "top_k_renorm_prob", "top_p_renorm_prob",
    "tree_speculative_sampling_target_only", "_can_use_sparse_uno_tree_target_sampling"]}


@pytest.fixture(params=PATCHED)
def sample(trees, monkeypatch, request):  # noqa: F811
    """eagle_sample of one patched tree; its function-local imports get stand-ins."""
    tree = trees.get(request.param)
    upstream = request.param == "upstream"
    sim = load_defs(source(tree, SPEC_UTILS), [SIM_SAMPLER[request.param], "generate_simulated_accept_index"],
                    extra={"SIMULATE_ACC_LEN": -1.0, "SIMULATE_ACC_METHOD": "match-expected",
                           "SIMULATE_ACC_TOKEN_MODE": "fixed", "_is_cuda": False, "simulated_accept": None})
    spec_utils = _module(SPEC_UTILS, SIMULATE_ACC_LEN=-1.0, SIMULATE_ACC_TOKEN_MODE="fixed",
                         generate_simulated_accept_index=sim["generate_simulated_accept_index"])
    stubs = {
        "sglang": _module("sglang", __path__=[]), "sglang.srt": _module("sglang.srt", __path__=[]),
        "sglang.srt.distributed": _module("sglang.srt.distributed", get_tp_group=None),
        "sglang.srt.layers": _module("sglang.srt.layers", __path__=[]),
        "sglang.srt.layers.dp_attention": _module("d", is_dp_attention_enabled=lambda: False),
        "sglang.srt.sampling": _module("sglang.srt.sampling", __path__=[]),
        "sglang.srt.sampling.penaltylib": _module("sglang.srt.sampling.penaltylib", __path__=[]),
        "sglang.srt.sampling.penaltylib.repetition_penalty": _module("r", apply_scaling_penalties=None),
        "sglang.srt.speculative": _module("sglang.srt.speculative", __path__=[]),
        SPEC_UTILS: spec_utils,
        "sglang.srt.utils": _module("sglang.srt.utils", __path__=[]),
        "sglang.srt.utils.async_probe": _module("a", maybe_detect_nan=lambda *a: None,
                                                sanitize_nan_logits=lambda *a: None),
        "sglang.srt.runtime_context": _module("sglang.srt.runtime_context", get_parallel=None),
    }
    for name, mod in stubs.items():
        monkeypatch.setitem(sys.modules, name, mod)
    greedy_calls = []

    def verify_tree_greedy_func(*, predicts, accept_index, accept_token_num, candidates, target_predict,
                                retrieve_index, retrieve_next_token, retrieve_next_sibling, topk):
        greedy_calls.append(candidates.shape)
        bs, k = candidates.shape  # a top-1 chain, the only tree the reference walks
        assert topk == 1 and (retrieve_next_sibling == -1).all()
        assert retrieve_index.flatten().tolist() == list(range(bs * k))
        assert (retrieve_next_token[:, :-1] == torch.arange(1, k)).all() and (retrieve_next_token[:, -1] == -1).all()
        r = reference(candidates, target_predict)
        predicts.copy_(torch.tensor(r["predict"], dtype=torch.int32))
        accept_index.copy_(torch.tensor(r["accept_index"], dtype=torch.int32))
        accept_token_num.copy_(torch.tensor(r["num_correct_drafts"], dtype=torch.int32))
        return predicts, accept_index, accept_token_num

    extra = {"verify_tree_greedy_func": verify_tree_greedy_func, "_is_cpu": False, "_is_npu": False,
             "_is_hip": False, "_is_xpu": False, "get_spec": (lambda: NO_SPEC) if upstream else None,
             "get_parallel": None, **(UPSTREAM_SAMPLE_EXTRA if upstream else {})}
    names = ["eagle_sample", *(["_verify_uses_greedy"] if upstream else [])]
    fn = load_defs(source(tree, UTILS), names, extra=extra)["eagle_sample"]
    return fn, spec_utils, greedy_calls


def sample_inputs(bs: int, k: int, seed: int):
    cand, target = chain_problem(bs, k, seed)
    logits = torch.randn(bs * k, VOCAB)
    logits[torch.arange(bs * k), target.flatten()] = 10.0
    nxt = torch.arange(1, k + 1).repeat(bs, 1)
    nxt[:, -1] = -1
    verify_input = SimpleNamespace(draft_token=cand.flatten(), draft_token_num=k, max_tree_depth=k, tree_topk=1,
                                   retrieve_index=torch.arange(bs * k).view(bs, k), retrieve_next_token=nxt,
                                   retrieve_next_sibling=torch.full((bs, k), -1))
    batch = SimpleNamespace(device="cpu", seq_lens=torch.zeros(bs, dtype=torch.int64),
                            forward_mode=SimpleNamespace(is_idle=lambda: False),
                            sampling_info=SimpleNamespace(is_all_greedy=True, acc_additive_penalties=None,
                                                          acc_scaling_penalties=None, logit_bias=None))
    return verify_input, batch, SimpleNamespace(next_token_logits=logits), cand, target


def in_graph_result(cand: torch.Tensor, target: torch.Tensor):
    r = reference(cand, target)
    i32 = lambda v: torch.tensor(v, dtype=torch.int32)  # noqa: E731
    return SimpleNamespace(predict=i32(r["predict"]), accept_index=i32(r["accept_index"]),
                           target_predict=target.to(torch.int32), accept_lens=i32(r["accept_lens"]),
                           bonus_tokens=i32(r["bonus"]), num_correct_drafts=i32(r["num_correct_drafts"]))


@pytest.mark.parametrize("simulate", [None, "fixed", "real-draft-token"])
@pytest.mark.parametrize("k", [1, 4])
def test_eagle_sample_returns_the_in_graph_acceptance(sample, monkeypatch, simulate, k: int) -> None:
    fn, spec_utils, greedy_calls = sample
    if simulate is not None:
        monkeypatch.setattr(spec_utils, "SIMULATE_ACC_LEN", 3.0 if k > 1 else 1.0)
        monkeypatch.setattr(spec_utils, "SIMULATE_ACC_TOKEN_MODE", simulate)
    verify_input, batch, logits_output, cand, target = sample_inputs(5, k, seed=3)
    eager = [t.tolist() for t in fn(verify_input, batch, logits_output, None)]
    accepted = in_graph_result(cand, target)
    if simulate is None:
        assert eager[1] == accepted.accept_lens.tolist()  # the in-graph result is the eager one
    assert len(greedy_calls) == 1
    got = [t.tolist() for t in fn(verify_input, batch, logits_output, None, greedy_accept=accepted)]
    assert got == eager
    assert len(greedy_calls) == 1, "with the in-graph result, verify_tree_greedy must not run again"


if __name__ == "__main__":
    print(json.dumps([_child(tree, TAIL[name]) for name, tree in zip(PATCHED, sys.argv[1:], strict=True)]))

"""Patch 0048 (0.5.17 only, SGLANG_ENABLE_TRITON_MLA_CHUNKED_PREFIX): Triton MLA prefill over a long cached prefix as
SGLang's chunked-prefix MHA (MHA_CHUNKED_KV) instead of absorbed MLA.

The switch keeps the load-time gate from turning the chunked prefix cache off for the Triton backend; the dispatch
sends an extend (no speculation) over a prefix of at least the threshold to MHA_CHUNKED_KV (none: MHA, as before;
below it, disabled, verify: MLA); ``TritonAttnBackend.forward_extend`` serves the model's two calls with the extend
kernel (the extend tokens causally among themselves, then each chunk of the decompressed prefix), each with its
natural-log LSE by token and head. The model merges them with ``merge_state_v2`` (here: the same arithmetic in
torch); the result must equal attention over prefix and extend together, a request with no key in a chunk
included. Kernels run under ``TRITON_INTERPRET=1`` in a child process (Triton picks interpreted or compiled at its
first import), on the patched tree's backend method and 0.5.17's own extend kernel; the release has none of it.
"""

from __future__ import annotations

import json
import math
import sys
import types
from pathlib import Path

import pytest
import torch
from sglang_trees import SHOWS_THE_BUG, TreeImporter, assert_switch_default, load_defs, source, tree_defs
from sglang_trees import env_flag as flag
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_verify_grouped_attention import BACKEND, interpreted_results, load_kernels

from benchmark.tools.mla_prefill_bench import torch_merge as merge  # merge_state_v2's arithmetic

SWITCH = "SGLANG_ENABLE_TRITON_MLA_CHUNKED_PREFIX"
HANDLER = "sglang.srt.models.deepseek_common.attention_backend_handler"
GATE = "sglang.srt.model_executor.model_runner_components.misc_utils"
TREES = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]
HEADS, NOPE, ROPE, LV = 2, 128, 64, 128
PREFIX, EXTEND, CHUNK = [40, 0, 23, 9], [5, 7, 3, 70], 24  # the last request's extend spans two query tiles


def causal_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Float64 attention of each request's extend queries over its prefix and, causally, its extend keys."""
    out, qs, ks = [], 0, 0
    for p, e in zip(PREFIX, EXTEND):
        qi, ki, vi = q[qs:qs + e].double(), k[ks:ks + p + e].double(), v[ks:ks + p + e].double()
        scores = torch.einsum("qhd,khd->hqk", qi, ki) * scale
        allowed = torch.arange(p + e)[None, :] <= (p + torch.arange(e))[:, None]
        scores = scores.masked_fill(~allowed, -math.inf)
        out.append(torch.einsum("hqk,khd->qhd", scores.softmax(-1), vi))
        qs, ks = qs + e, ks + p + e
    return torch.cat(out)


def run_chunked(tree: Path, extend_fwd) -> dict:
    """The model's MHA_CHUNKED_KV calls on the patched forward_extend: the extend part, then each prefix chunk (its
    rows request by request, as _chunked_prefix_attn_mha gathers them), merged by LSE."""
    gen = torch.Generator().manual_seed(48)
    total_kv = sum(PREFIX) + sum(EXTEND)
    q = torch.randn(sum(EXTEND), HEADS, NOPE + ROPE, generator=gen).to(torch.float16)
    k = torch.randn(total_kv, HEADS, NOPE + ROPE, generator=gen).to(torch.float16)
    kv = torch.randn(total_kv, HEADS, 2 * LV, generator=gen).to(torch.float16)
    v = kv[..., LV:]  # a strided view, as kv_b_proj's output split gives it
    scale = (NOPE + ROPE) ** -0.5
    starts = torch.tensor([0] + [p + e for p, e in zip(PREFIX, EXTEND)]).cumsum(0)
    ext_rows = torch.cat([torch.arange(s + p, s + p + e) for s, p, e in zip(starts, PREFIX, EXTEND)])

    defs = load_defs(source(tree, BACKEND), ["logit_capping_mod", "TritonAttnBackend.forward_extend",
                                              "TritonAttnBackend._forward_extend_chunked_prefix"],
                     {"KVWriteLoc": None, "SWAKVPool": type("NoPool", (), {}),
                      "AttentionType": types.SimpleNamespace(ENCODER_ONLY="e", DECODER_BIDIRECTIONAL="b"),
                      "MAX_VERIFY_TOKENS": 8})
    qo_indptr = torch.tensor([0] + EXTEND).cumsum(0).to(torch.int32)
    backend = types.SimpleNamespace(extend_attention_fwd=extend_fwd, forward_metadata=types.SimpleNamespace(
        qo_indptr=qo_indptr, kv_indptr=torch.tensor([0] + PREFIX).cumsum(0).to(torch.int32),
        kv_indices=torch.zeros(sum(PREFIX), dtype=torch.int64), max_extend_len=max(EXTEND)))
    backend._forward_extend_chunked_prefix = types.MethodType(
        defs["TritonAttnBackend._forward_extend_chunked_prefix"], backend)
    layer = types.SimpleNamespace(tp_q_head_num=HEADS, qk_head_dim=NOPE + ROPE, v_head_dim=LV,
                                  logit_capping_method="tanh", logit_cap=0.0, scaling=scale)
    chunks = [[min(max(p - c, 0), CHUNK) for p in PREFIX] for c in range(0, max(PREFIX), CHUNK)]
    batch = types.SimpleNamespace(
        forward_mode=types.SimpleNamespace(is_extend_without_speculative=lambda: True),
        extend_prefix_lens_cpu=PREFIX, mha_return_lse=True, attn_attend_prefix_cache=False, prefix_chunk_idx=None,
        prefix_chunk_cu_seq_lens=[torch.tensor([0] + c).cumsum(0).to(torch.int32) for c in chunks],
        prefix_chunk_has_zero_kv=[0 in c for c in chunks])
    forward_extend = defs["TritonAttnBackend.forward_extend"]

    # v as the model passes it: a strided view of kv_b_proj's output
    o, lse = forward_extend(backend, q, k[ext_rows], kv[ext_rows][..., LV:], layer, batch, save_kv_cache=False)
    first_nan = bool(torch.isnan(o).any())
    batch.attn_attend_prefix_cache = True
    chunk_nan = []
    for i, lens in enumerate(chunks):
        batch.prefix_chunk_idx = i
        rows = torch.cat([torch.arange(s + i * CHUNK, s + i * CHUNK + n) for s, n in zip(starts, lens)])
        o_c, lse_c = forward_extend(backend, q, k[rows], kv[rows][..., LV:], layer, batch, save_kv_cache=False)
        chunk_nan.append(bool(torch.isnan(o_c).any()))
        o, lse = merge(o_c, lse_c, o, lse)
    ref = causal_reference(q, k, v, scale)
    return {"chunks": len(chunks), "zero_kv": batch.prefix_chunk_has_zero_kv, "first_nan": first_nan,
            "chunk_nan": chunk_nan, "shape": list(o.shape), "lse_shape": list(lse.shape),
            "rel": float((o.double() - ref).abs().max() / ref.abs().max())}


def _child(tree: str) -> list[dict]:
    """In the TRITON_INTERPRET=1 process."""
    _, extend = load_kernels(Path(tree))
    return [{"case": {"name": "chunked"}, **run_chunked(Path(tree), extend)}]


@pytest.fixture(scope="module")
def results(trees) -> dict[str, dict]:  # noqa: F811
    return interpreted_results(__file__, trees.patched)


@pytest.mark.slow  # the TRITON_INTERPRET child process, about 10 s on 2 cores
def test_extend_and_prefix_chunks_merge_to_attention_over_the_whole_sequence(results: dict[str, dict]) -> None:
    r = results["chunked"]
    assert r["chunks"] == 2 and r["zero_kv"] == [True, True], "the case must cover requests with no key in a chunk"
    assert r["shape"] == [sum(EXTEND), HEADS, LV] and r["lse_shape"] == [sum(EXTEND), HEADS]
    assert not r["first_nan"] and r["chunk_nan"] == [False, False], "an empty chunk row must come back as 0, not 0/0"
    assert r["rel"] < 5e-3, r


@pytest.mark.parametrize("tree_name", TREES)
def test_the_switch_exists_and_defaults_on(trees, monkeypatch, tree_name: str) -> None:
    """On by default since its first GPU run (session 41, one H100: a kimi16 16k-token request 2.37x faster end to
    end, the same output); 0 keeps 0.5.17's absorbed MLA."""
    assert_switch_default(trees.get(tree_name), SWITCH, monkeypatch, default=True)


def dispatch(tree: Path, prefix: list[int], disabled: bool = False, speculative: bool = False,
             deterministic: bool = False, prefill_cp: bool = False, switch: bool = True, cuda: bool = True,
             mixed: bool = False) -> str:
    methods = types.SimpleNamespace(MLA="MLA", MHA="MHA", MHA_CHUNKED_KV="MHA_CHUNKED_KV")
    fn = tree_defs(tree, HANDLER, ["handle_attention_triton"], extra={
        "is_in_tc_piecewise_cuda_graph": lambda: False, "is_in_breakable_cuda_graph": lambda: False,
        "get_exec": lambda: types.SimpleNamespace(
            deterministic=types.SimpleNamespace(enable_deterministic_inference=deterministic)),
        "_dispatch_mla_subtype": lambda attn, batch: "MLA", "AttnForwardMethod": methods,
        "_can_use_triton_dense_fp8_prefill": lambda attn, batch: False,
        "mla_use_prefill_cp": lambda batch: prefill_cp, "_is_cuda": cuda,
        "envs": types.SimpleNamespace(SGLANG_ENABLE_TRITON_MLA_CHUNKED_PREFIX=flag(switch))})["handle_attention_triton"]
    attn = types.SimpleNamespace(disable_chunked_prefix_cache=disabled, chunked_prefix_cache_threshold=8192)
    batch = types.SimpleNamespace(extend_prefix_lens_cpu=prefix, forward_mode=types.SimpleNamespace(
        is_extend_without_speculative=lambda: not speculative, is_mixed=lambda: mixed))
    return fn(attn, batch)


@pytest.mark.parametrize("tree_name", TREES)
def test_a_long_cached_prefix_goes_to_chunked_mha(trees, tree_name: str) -> None:
    tree = trees.get(tree_name)
    assert dispatch(tree, [8192, 0]) == "MHA_CHUNKED_KV"
    assert dispatch(tree, [4096, 4096]) == "MHA_CHUNKED_KV"  # the threshold is on the batch's sum, as upstream's
    assert dispatch(tree, [0, 0]) == "MHA"
    assert dispatch(tree, [8191]) == "MLA"
    assert dispatch(tree, [16384], disabled=True) == "MLA"  # --disable-chunked-prefix-cache, or the gate
    assert dispatch(tree, [16384], speculative=True) == "MLA"  # target verify, draft extend
    assert dispatch(tree, [16384], deterministic=True) == "MLA"
    assert dispatch(tree, [16384], prefill_cp=True) == "MLA"  # MLA prefill CP keeps absorbed MLA everywhere
    # the switch itself, not only the gate: another backend's gate (--prefill-attention-backend triton beside fa3,
    # a Triton MLA draft beside an fa3 target) leaves the chunked prefix cache on with the switch unset
    assert dispatch(tree, [16384], switch=False) == "MLA"
    assert dispatch(tree, [16384], cuda=False) == "MLA"  # the model merges with sgl-kernel, CUDA only
    assert dispatch(tree, [16384], mixed=True) == "MLA"  # a mixed batch's decode rows are no prefix to decompress


class ReachedTheUsualPath(Exception):
    """Raised where forward_extend goes on past the chunked-prefix branch."""


class UsualPathBackend:
    """A backend whose chunked-prefix method records its calls and whose usual path stops at its first read."""

    def __init__(self) -> None:
        self.chunked: list[bool] = []

    def _forward_extend_chunked_prefix(self, *args) -> str:
        self.chunked.append(True)
        return "chunked"

    def __getattr__(self, name: str):
        raise ReachedTheUsualPath(name)


@pytest.mark.parametrize("tree_name", TREES)
def test_only_a_plain_extend_with_the_flag_set_takes_the_chunked_branch(trees, tree_name: str) -> None:
    """forward_extend takes the branch on the ForwardBatch's attn_attend_prefix_cache, which the model leaves set
    after its chunked calls: a verify or draft-extend batch, a batch without a prefix or without the flag must go
    the usual way."""
    defs = load_defs(source(trees.get(tree_name), BACKEND), ["logit_capping_mod", "TritonAttnBackend.forward_extend"],
                     {"KVWriteLoc": None, "SWAKVPool": type("NoPool", (), {}), "MAX_VERIFY_TOKENS": 8,
                      "AttentionType": types.SimpleNamespace(ENCODER_ONLY="e", DECODER_BIDIRECTIONAL="b")})
    layer = types.SimpleNamespace(qk_head_dim=192, v_head_dim=128, tp_q_head_num=2, logit_capping_method="tanh",
                                  logit_cap=0.0, is_cross_attention=False, attn_type="decoder")
    q, k, v = torch.zeros(3, 2, 192), torch.zeros(3, 2, 192), torch.zeros(3, 2, 128)

    def took_branch(flag_value, plain_extend: bool, prefix: list[int]) -> bool:
        backend = UsualPathBackend()
        batch = types.SimpleNamespace(attn_attend_prefix_cache=flag_value, extend_prefix_lens_cpu=prefix,
                                      forward_mode=types.SimpleNamespace(
                                          is_extend_without_speculative=lambda: plain_extend))
        try:
            out = defs["TritonAttnBackend.forward_extend"](backend, q, k, v, layer, batch, save_kv_cache=False)
        except ReachedTheUsualPath:
            return False
        return out == "chunked" and backend.chunked == [True]

    assert took_branch(True, True, [5]) and took_branch(False, True, [5])
    assert not took_branch(True, False, [5]), "a verify or draft-extend batch with the flag left set"
    assert not took_branch(None, True, [5]), "absorbed MLA's own extend"
    assert not took_branch(True, True, [0]), "no cached prefix"


def gate(tree: Path, monkeypatch: pytest.MonkeyPatch, backend: str, switch: bool, mla: bool = True) -> bool:
    """Whether maybe_disable_chunked_prefix_cache turns the chunked prefix cache off."""
    monkeypatch.setenv(SWITCH, "1" if switch else "0")
    overrides: list[dict] = []
    envs = TreeImporter.module(tree, "sglang.srt.environ").envs
    fn = tree_defs(tree, GATE, ["maybe_disable_chunked_prefix_cache"], extra={
        "get_exec": lambda: types.SimpleNamespace(kernel=types.SimpleNamespace(attention_backend=backend)),
        "get_schedule": lambda: types.SimpleNamespace(disable_chunked_prefix_cache=False),
        "get_context": lambda: types.SimpleNamespace(override=lambda name, **kw: overrides.append(kw)),
        "CHUNKED_PREFIX_CACHE_SUPPORTED_ATTENTION_BACKENDS": ["flashinfer", "fa3"], "envs": envs,
        "logger": types.SimpleNamespace(info=lambda *a: None)})["maybe_disable_chunked_prefix_cache"]
    fn(use_mla_backend=mla, is_draft_worker=False)
    return overrides == [{"disable_chunked_prefix_cache": True}]


@pytest.mark.parametrize("tree_name", TREES)
def test_the_switch_keeps_the_chunked_prefix_cache_on_for_triton(trees, monkeypatch, tree_name: str) -> None:
    tree = trees.get(tree_name)
    assert not gate(tree, monkeypatch, "triton", switch=True)
    assert gate(tree, monkeypatch, "triton", switch=False), "switched off: the absorbed MLA path as before"
    assert not gate(tree, monkeypatch, "fa3", switch=False)
    assert gate(tree, monkeypatch, "triton", switch=True, mla=False), "a model without MLA keeps it off"
    assert gate(tree, monkeypatch, "torch_native", switch=True)


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1])))

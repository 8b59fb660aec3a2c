"""Patch 0035: plain decode through patch 0007's grouped split-KV kernel, without extend tokens.

The kernel (``verify_grouped_attention_fwd`` with ``k_extend``/``v_extend`` None, one query per request) runs under
``TRITON_INTERPRET=1`` in a child process, fp16, on decode's inputs: the KV indices cover the whole sequence, the
current token included. Each case is compared with a float64 reference and with SGLang 0.5.17's own
``decode_attention_fwd`` (what forward_decode runs without the switch) on the same inputs: MLA (576/512, one latent
KV head, value = the key's first 512 columns), GQA (head dim 128, 8 heads on 2 KV heads) and MHA, page sizes 1 and
16, bs 1-3, contexts of 1 token, a partial page and a few hundred tokens, forced split counts (merge path), one
split (direct store), the default plan (64 heads: decode's own tile, all heads in one program) and a logit cap.
The output is poisoned with NaN with spare rows around it: every row written, nothing outside.

The patched ``TritonAttnBackend.forward_decode`` runs on a fake backend (its KV save into a fake pool whose current
slots were NaN, so the attention must read what the save wrote): the grouped kernel with
SGLANG_ENABLE_TRITON_GROUPED_DECODE's flag on at 64+ MLA heads or one MLA request, SGLang's decode kernel with it
off, at fewer heads for several requests, for GQA, with deterministic inference, and for a sliding-window layer, a
KV scale or sinks. In this process: the assertion without extend tokens at num_tokens > 1, the env knob (on by
default since session 29's runs) and the patched ``TritonAttnBackend.__init__`` (on stubs) setting
``use_decode_grouped`` for the target only.
Marked ``gpu``: the cases compiled on a GPU with the installed fork's module, fp16 and bf16, eager and replayed from a
CUDA graph.
"""

from __future__ import annotations

import ast
import json
import logging
import subprocess
import sys
import types
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
import torch

from fastpath_fixtures import installed_gpu_module, replay_in_cuda_graph, script_env
from sglang_trees import (  # noqa: F401 (trees: a fixture)
    TreeImporter, _parsed, _used_names, annotations_flag, assert_switch_default, load_defs, source, trees)
from test_verify_grouped_attention import BACKEND, DECODE, MAX_VERIFY_TOKENS, SCORE_MOD, VERIFY, FakePool, load_kernels

SPARE_ROWS = 2
ENVIRON = "sglang.srt.environ"


@dataclass(frozen=True)
class Case:
    name: str
    mla: bool
    lens: tuple[int, ...]  # keys per request, the current token included
    heads: int
    kv_heads: int
    page: int
    logit_cap: float = 0.0
    max_splits: int | None = None
    min_split_len: int | None = None
    seed: int = 0


CASES = [
    Case("mla-p1-splits4", True, (37, 130), 8, 1, 1, max_splits=4, min_split_len=32),
    Case("mla-p16-one-token-partial-page", True, (1, 21, 300), 16, 1, 16, max_splits=8, min_split_len=32, seed=1),
    Case("mla-p16-direct", True, (1, 77), 4, 1, 16, max_splits=1, seed=2),
    Case("mla-h32-default-plan", True, (200, 5), 32, 1, 1, seed=3),
    Case("mla-cap", True, (120, 3), 8, 1, 1, logit_cap=30.0, max_splits=2, min_split_len=32, seed=4),
    Case("gqa-p1-splits4", False, (150, 1), 8, 2, 1, max_splits=4, min_split_len=32, seed=5),
    Case("gqa-p16-bs3", False, (290, 33, 16), 8, 2, 16, max_splits=2, min_split_len=64, seed=6),
    Case("gqa-direct-cap", False, (95,), 8, 2, 1, logit_cap=30.0, max_splits=1, seed=7),
    Case("mha-p16-default-plan", False, (95, 7), 4, 4, 16, seed=8),
    Case("mla-h64-default-plan", True, (150, 3), 64, 1, 1, seed=9),  # decode's own tile: 64 heads a program
    Case("mla-h16-bs1-default-plan", True, (300,), 16, 1, 16, seed=10),
    Case("gqa-h64-bs2", False, (40, 7), 64, 8, 1, seed=11),
]
BY_NAME = {c.name: c for c in CASES}


def make_inputs(case: Case) -> dict:
    """A pool with each request's keys on scattered pages; one query per request, as forward_decode passes them."""
    g = torch.Generator().manual_seed(case.seed)
    lk, lv = (576, 512) if case.mla else (128, 128)
    pages_per_req = [-(-n // case.page) for n in case.lens]
    num_pages = sum(pages_per_req) + 3
    order = torch.randperm(num_pages, generator=g).tolist()
    slots, indptr = [], [0]
    for b, n in enumerate(case.lens):
        pages = [order.pop() for _ in range(pages_per_req[b])]
        slots += [pages[p // case.page] * case.page + p % case.page for p in range(n)]
        indptr.append(len(slots))
    pool = num_pages * case.page
    key = (torch.randn(pool, case.kv_heads, lk, generator=g) / 2).half()
    value = key[..., :lv] if case.mla else (torch.randn(pool, case.kv_heads, lv, generator=g) / 2).half()
    q = (torch.randn(len(case.lens), case.heads, lk, generator=g) / 2).half()
    return {"q": q, "key": key, "value": value, "kv_indptr": torch.tensor(indptr, dtype=torch.int32),
            "kv_indices": torch.tensor(slots, dtype=torch.int64), "sm_scale": lk ** -0.5, "lv": lv}


def reference(case: Case, x: dict) -> torch.Tensor:
    """float64: each request's query over its keys, per head."""
    group = case.heads // case.kv_heads
    out = torch.zeros(len(case.lens), case.heads, x["lv"], dtype=torch.float64)
    for b in range(len(case.lens)):
        slots = x["kv_indices"][x["kv_indptr"][b]:x["kv_indptr"][b + 1]]
        keys, values = x["key"][slots].double(), x["value"][slots].double()
        for h in range(case.heads):
            scores = keys[:, h // group] @ x["q"][b, h].double() * x["sm_scale"]
            if case.logit_cap > 0:
                scores = case.logit_cap * torch.tanh(scores / case.logit_cap)
            out[b, h] = scores.softmax(-1) @ values[:, h // group]
    return out


def paged(buf: torch.Tensor, page: int) -> torch.Tensor:
    return buf if page == 1 else buf.view(-1, page, *buf.shape[1:])


def max_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


def run_grouped(fwd, case: Case, x: dict) -> dict:
    rows = len(case.lens)
    spare = torch.full((rows + 2 * SPARE_ROWS, case.heads, x["lv"]), float("nan"), dtype=x["q"].dtype)
    o = spare[SPARE_ROWS:SPARE_ROWS + rows]
    fwd(x["q"], None, None, o, paged(x["key"], case.page), paged(x["value"], case.page), x["kv_indptr"],
        x["kv_indices"], 1, x["sm_scale"], logit_cap=case.logit_cap, page_size=case.page,
        max_kv_splits=case.max_splits, min_split_len=case.min_split_len)
    return {"out": o.double(), "spare_untouched": bool(spare[:SPARE_ROWS].isnan().all()
                                                      and spare[-SPARE_ROWS:].isnan().all())}


DECODE_SPLITS = 4


def decode_buffers(case: Case, x: dict) -> dict:
    """forward_decode's scratch for SGLang's decode kernel: logits, lse and the split count per request."""
    bs = len(case.lens)
    return {"attn_logits": torch.empty(bs, case.heads, DECODE_SPLITS, x["lv"]),
            "attn_lse": torch.empty(bs, case.heads, DECODE_SPLITS),
            "num_kv_splits": torch.full((bs,), DECODE_SPLITS, dtype=torch.int32)}


def run_sglang_decode(fwd, case: Case, x: dict) -> torch.Tensor:
    o = torch.full((len(case.lens), case.heads, x["lv"]), float("nan"), dtype=x["q"].dtype)
    buf = decode_buffers(case, x)
    fwd(x["q"], paged(x["key"], case.page), paged(x["value"], case.page), o, x["kv_indptr"], x["kv_indices"],
        buf["attn_logits"], buf["attn_lse"], buf["num_kv_splits"], DECODE_SPLITS, x["sm_scale"], 1.0, 1.0,
        logit_cap=case.logit_cap, has_mla=case.mla, page_size=case.page)
    return o.double()


def load_decode_kernel(tree: Path):
    strides = load_defs(source(tree, DECODE), ["_extract_kv_strides"])["_extract_kv_strides"]
    unpack = load_defs(source(tree, SCORE_MOD), ["unpack_aux_tensors"])["unpack_aux_tensors"]
    decode = load_defs(source(tree, DECODE), ["tanh", "_fwd_kernel_stage1", "_decode_att_m_fwd",
                                              "_fwd_grouped_kernel_stage1", "_decode_grouped_att_m_fwd",
                                              "_fwd_kernel_stage2", "_decode_softmax_reducev_fwd",
                                              "decode_attention_fwd_normal", "decode_attention_fwd_grouped",
                                              "decode_attention_fwd"],
                       {"_extract_kv_strides": strides, "unpack_aux_tensors": unpack, "_is_hip": False,
                        "_MIN_BLOCK_KV": 32, "logger": logging.getLogger("decode_attention")})
    assert type(decode["_fwd_grouped_kernel_stage1"]).__name__ == "InterpretedFunction"
    return decode["decode_attention_fwd"]


# ----------------------------------------------------------------------------- forward_decode on a fake backend


def run_backend(tree: Path, kernels: dict, case: Case, x: dict, grouped: bool, sinks=None, deterministic=False,
                **layer_overrides) -> dict:
    """The patched TritonAttnBackend.forward_decode on one decode batch: which kernel ran, and o. The current
    token's K/V (each request's last key) is in its slot only once forward_decode saves it: it is NaN before.
    ``deterministic``: the backend's enable_deterministic (--enable-deterministic-inference)."""
    defs = load_defs(source(tree, BACKEND), ["logit_capping_mod", "TritonAttnBackend.forward_decode",
                                              "TritonAttnBackend._set_kv_buffer"],
                     {"KVWriteLoc": lambda loc, swa_loc, full_loc=None: loc, "get_parallel": None,
                      "use_symmetric_memory": None, "cp_lse_ag_out_rs_mha": None})
    calls: list[str] = []

    def spy(name: str):
        return lambda *a, **kw: (calls.append(name), kernels[name](*a, **kw))[1]

    bs = len(case.lens)
    current = x["kv_indices"][x["kv_indptr"][1:].long() - 1]  # each request's last slot: the token decoded now
    cur_k, cur_v = x["key"][current].clone(), x["value"][current].clone()
    pool_k = x["key"].clone()
    pool_k[current] = float("nan")
    pool_v = pool_k[..., :x["lv"]] if case.mla else x["value"].clone()
    if not case.mla:
        pool_v[current] = float("nan")
    backend = types.SimpleNamespace(
        token_to_kv_pool=FakePool(pool_k, pool_v, case.mla), dcp_size=1, use_mla=case.mla, page_size=case.page,
        use_decode_grouped=grouped, enable_deterministic=deterministic, verify_grouped_attention_fwd=spy("grouped"),
        decode_attention_fwd=spy("decode"),
        max_kv_splits=DECODE_SPLITS, use_pdl=False, swa_v_head_dim=None,
        forward_metadata=types.SimpleNamespace(
            kv_indptr=x["kv_indptr"], kv_indices=x["kv_indices"], swa_attn_logits=None,
            # A window wider than any context: the sliding-window fallback must match the reference too.
            window_kv_indptr=x["kv_indptr"], window_kv_indices=x["kv_indices"], swa_out_cache_loc=None,
            out_cache_loc_full_physical=None, **decode_buffers(case, x)))
    backend._set_kv_buffer = types.MethodType(defs["TritonAttnBackend._set_kv_buffer"], backend)
    layer = types.SimpleNamespace(
        tp_q_head_num=case.heads, qk_head_dim=x["q"].shape[-1], v_head_dim=x["lv"], layer_id=0, k_scale=None,
        v_scale=None, logit_capping_method="tanh", logit_cap=case.logit_cap, sliding_window_size=-1,
        scaling=x["sm_scale"], xai_temperature_len=-1)
    for name, value in layer_overrides.items():
        setattr(layer, name, value)
    batch = types.SimpleNamespace(out_cache_loc=current, batch_size=bs)
    # MLA: k is the latent + rope row of the new token and v its first 512 columns, as the MLA layers pass them.
    k = cur_k.clone()
    v = k[..., :x["lv"]] if case.mla else cur_v.clone()
    o = defs["TritonAttnBackend.forward_decode"](backend, x["q"].reshape(bs, -1), k, v, layer, batch, sinks=sinks)
    return {"calls": calls, "out": o.view(bs, case.heads, x["lv"]).double()}


SCALES = {"k_scale": 1.0, "v_scale": 1.0, "k_scale_float": 1.0, "v_scale_float": 1.0}
DISPATCH = [  # case name, the switch, sinks (a very negative logit: no weight), layer overrides, the calls
    # With the switch: MLA at 64+ heads at any batch size, at fewer heads for one request only (where H200 measured it
    # faster); GQA/MHA keep the decode kernel (not measured), one request included.
    ("mla-h64-default-plan", True, False, {}, ["grouped"]),
    ("mla-h16-bs1-default-plan", True, False, {}, ["grouped"]),
    ("gqa-direct-cap", True, False, {}, ["decode"]),
    ("mla-p1-splits4", True, False, {}, ["decode"]),  # 8 heads, 2 requests
    ("mla-p16-one-token-partial-page", True, False, {}, ["decode"]),  # 16 heads, 3 requests
    ("gqa-p16-bs3", True, False, {}, ["decode"]),
    ("mla-h64-default-plan", False, False, {}, ["decode"]),
    ("gqa-direct-cap", False, False, {}, ["decode"]),
    ("gqa-direct-cap", True, False, {"sliding_window_size": 4096}, ["decode"]),
    ("gqa-direct-cap", True, False, SCALES, ["decode"]),
    ("mla-h64-default-plan", True, False, SCALES, ["decode"]),
    ("gqa-direct-cap", True, True, {}, ["decode"]),
    ("gqa-h64-bs2", True, False, {}, ["decode"]),  # 64 heads but GQA: the 64-head rule is MLA's (measured there)
    ("gqa-h64-bs2", False, False, {}, ["decode"]),
    ("mla-h64-default-plan", True, False, {"deterministic": True}, ["decode"]),  # not batch-invariant
    ("gqa-direct-cap", True, False, {"deterministic": True}, ["decode"]),
]


def _child(tree: str) -> dict:
    """In the TRITON_INTERPRET=1 process: every case and dispatch row, results as plain data."""
    grouped, _ = load_kernels(Path(tree))
    decode = load_decode_kernel(Path(tree))
    results = {}
    for case in CASES:
        x = make_inputs(case)
        ref = reference(case, x)
        got = run_grouped(grouped, case, x)
        sgl = run_sglang_decode(decode, case, x)
        results[case.name] = {"case": asdict(case), "nan": bool(got["out"].isnan().any()),
                              "spare_untouched": got["spare_untouched"], "rel_ref": max_rel(got["out"], ref),
                              "rel_sglang": max_rel(got["out"], sgl), "sglang_rel_ref": max_rel(sgl, ref)}
    for i, (name, on, sinks, overrides, want) in enumerate(DISPATCH):
        case = BY_NAME[name]
        x = make_inputs(case)
        sink_logits = torch.full((case.heads,), -1e4) if sinks else None
        got = run_backend(Path(tree), {"grouped": grouped, "decode": decode}, case, x, on, sink_logits, **overrides)
        results[f"dispatch-{i}"] = {"calls": got["calls"], "want": want, "nan": bool(got["out"].isnan().any()),
                                    "rel_ref": max_rel(got["out"], reference(case, x))}
    return results


@pytest.fixture(scope="module")
def results(trees) -> dict[str, dict]:  # noqa: F811
    done = subprocess.run([sys.executable, __file__, str(trees.patched)], env=script_env(TRITON_INTERPRET="1"),
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow  # the TRITON_INTERPRET child process (``results``)
@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_kernel_without_extend_matches_float64_reference(results: dict, name: str):
    r = results[name]
    assert not r["nan"], f"{name}: NaN left in the output (a row was not written)"
    assert r["rel_ref"] < 5e-3, f"{name}: max relative error vs float64 {r['rel_ref']}"
    assert r["spare_untouched"], f"{name}: rows outside the output written"


@pytest.mark.slow  # the TRITON_INTERPRET child process (``results``)
@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_kernel_without_extend_matches_sglang_decode_kernel(results: dict, name: str):
    r = results[name]
    assert r["sglang_rel_ref"] < 5e-3, f"{name}: SGLang's decode kernel itself is off ({r['sglang_rel_ref']})"
    assert r["rel_sglang"] < 5e-3, f"{name}: max relative difference vs decode_attention_fwd {r['rel_sglang']}"


@pytest.mark.slow  # the TRITON_INTERPRET child process (``results``)
@pytest.mark.parametrize("index", range(len(DISPATCH)))
def test_forward_decode_dispatch(results: dict, index: int):
    """With the switch, forward_decode runs the grouped kernel (after the KV save: the current slots were NaN) at
    64+ heads of MLA or for one MLA request; without it, at fewer heads for several requests, for GQA, with
    deterministic inference, and for a sliding-window layer, a KV scale or sinks, SGLang's decode kernel; the
    output is right."""
    r = results[f"dispatch-{index}"]
    assert r["calls"] == r["want"], (DISPATCH[index], r)
    assert not r["nan"] and r["rel_ref"] < 5e-3, (DISPATCH[index], r)


def test_cases_cover_the_brief():
    lens = [n for c in CASES for n in c.lens]
    assert {c.page for c in CASES} == {1, 16} and {c.mla for c in CASES} == {True, False}
    assert {len(c.lens) for c in CASES} == {1, 2, 3} and 1 in lens and max(lens) >= 290
    assert any(n % 16 and n > 16 for c in CASES if c.page == 16 for n in c.lens)  # a partial last page
    assert any(c.max_splits == 1 for c in CASES) and any((c.max_splits or 0) > 1 for c in CASES)
    assert any(c.max_splits is None for c in CASES) and any(c.logit_cap > 0 for c in CASES)
    assert any(c.mla and c.heads >= 64 and c.max_splits is None for c in CASES)  # decode's own 64-head tile


def _verify_fwd(tree: Path):
    """The patched wrapper in this process (the kernels are defined, not launched)."""
    defs = load_defs(source(tree, VERIFY), ["_scaled_scores", "_accumulate", "_key_tile_scores",
                                            "_verify_grouped_stage1", "_verify_grouped_merge",
                                            "_multiprocessor_count", "_programs_target", "verify_grouped_tile",
                                            "verify_grouped_plan", "verify_grouped_attention_fwd"],
                     {"_extract_kv_strides": None, "MAX_VERIFY_TOKENS": MAX_VERIFY_TOKENS})
    return defs["verify_grouped_attention_fwd"]


@pytest.mark.parametrize("num_tokens", [2, 4])
def test_no_extend_needs_one_token_per_request(trees, num_tokens: int):  # noqa: F811
    fwd = _verify_fwd(trees.patched)
    x = make_inputs(BY_NAME["gqa-p1-splits4"])
    q = x["q"].repeat_interleave(num_tokens, 0)
    o = torch.empty(q.shape[0], q.shape[1], x["lv"], dtype=q.dtype)
    with pytest.raises(AssertionError, match="num_tokens must be 1"):
        fwd(q, None, None, o, x["key"], x["value"], x["kv_indptr"], x["kv_indices"], num_tokens, x["sm_scale"])


# ----------------------------------------------------------------------------- the switch and __init__


@pytest.fixture
def environ(trees, monkeypatch):  # noqa: F811
    monkeypatch.delenv("SGLANG_ENABLE_TRITON_GROUPED_DECODE", raising=False)
    yield TreeImporter.module(trees.patched, ENVIRON)
    TreeImporter.restore()


def test_switch_defaults_on(trees, environ, monkeypatch):  # noqa: F811
    assert_switch_default(trees.patched, "SGLANG_ENABLE_TRITON_GROUPED_DECODE", monkeypatch, default=True)


def _backend_class(tree: Path, extra: dict) -> type:
    """TritonAttnBackend with only its patched ``__init__`` (``super()`` needs a class), over a stub base class;
    every module-level name it uses from ``extra``, else from the module's own imports (TreeImporter active)."""
    path = source(tree, BACKEND)
    module = ast.parse(path.read_text())
    cls = next(n for n in module.body if isinstance(n, ast.ClassDef) and n.name == "TritonAttnBackend")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    stub = ast.ClassDef(name="TritonAttnBackend", bases=[ast.Name("AttentionBackend", ast.Load())], keywords=[],
                        body=[init], decorator_list=[])
    if "type_params" in ast.ClassDef._fields:  # Python 3.12+
        stub.type_params = []
    namespace = {"__name__": "stub_triton_backend", "AttentionBackend": object, **extra}
    constants = [n for n in module.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]).isupper()]
    exec(compile(ast.Module(body=constants, type_ignores=[]), str(path), "exec"), namespace)  # _MLA_DECODE_...
    namespace.update(load_defs(path, ["_mla_decode_kv_splits_cap", "_shares_graph_state"], namespace))
    code = compile(ast.fix_missing_locations(ast.Module(body=[stub], type_ignores=[])), str(path), "exec",
                   flags=annotations_flag())
    imports = _parsed(path)[1]
    for name in sorted(_used_names(code) - set(namespace)):
        if name in imports:  # the module's own import of it (torch, the env-var helpers), that name only
            scratch: dict = {}
            exec(compile(ast.Module(body=[imports[name]], type_ignores=[]), str(path), "exec"), scratch)
            namespace[name] = scratch[name]
    exec(code, namespace)
    return namespace["TritonAttnBackend"]


def _model_runner(is_draft_worker: bool) -> types.SimpleNamespace:
    config = types.SimpleNamespace(attention_arch="mla", get_max_num_attention_heads=lambda: 32,
                                   get_num_kv_heads=lambda tp: 1, v_head_dim=512, swa_v_head_dim=None,
                                   context_len=4096, is_encoder_decoder=False)
    pool = types.SimpleNamespace(get_value_buffer=lambda layer: torch.empty(1, 1, 512))
    args = types.SimpleNamespace(triton_attention_num_kv_splits=8, enable_deterministic_inference=False,
                                 triton_attention_split_tile_size=None, chunked_prefill_size=8192,
                                 max_speculative_num_draft_tokens=4, enable_two_batch_overlap=False,
                                 enable_pdmux=False, speculative_adaptive=False, cuda_graph_config=None)
    return types.SimpleNamespace(
        req_to_token_pool=types.SimpleNamespace(size=4, req_to_token=torch.zeros(4, 16, dtype=torch.int32)),
        sliding_window_size=None, token_to_kv_pool=pool, token_to_kv_pool_allocator=object(), page_size=1,
        model_config=config, device="cpu", gpu_id=0, server_args=args, is_draft_worker=is_draft_worker)


@pytest.mark.parametrize("switch", [False, True])
def test_init_turns_decode_grouped_on_for_the_target_only(trees, environ, monkeypatch, switch: bool):  # noqa: F811
    """The patched __init__ on stubs: with the switch, the target model's backend uses the grouped decode (and says
    so once); the draft worker's and the multi-step draft backends (skip_prefill) do not; without it, none does."""
    monkeypatch.setenv("SGLANG_ENABLE_TRITON_GROUPED_DECODE", "1" if switch else "0")
    logged: list[str] = []
    spec = types.SimpleNamespace(speculative_num_draft_tokens=4, speculative_num_steps=3, speculative_eagle_topk=1)
    parallel = types.SimpleNamespace(attn_dcp_size=1, attn_dcp_rank=0, attn_tp_size=1)
    extra = {"envs": environ.envs, "get_spec": lambda: spec, "get_parallel": lambda: parallel,
             "log_info_on_rank0": lambda logger, msg: logged.append(msg), "logger": None,
             "AttentionArch": types.SimpleNamespace(MLA="mla"), "SWAKVPool": type("SWAKVPool", (), {}),
             "hybrid_gdn_config": lambda c: None, "kimi_linear_config": lambda c: None,
             "linear_attn_model_spec": lambda c: None, "get_device_core_count": lambda gpu: 132,
             "is_gfx95_supported": lambda: False, "_is_xpu": False, "_is_gfx942": False, "_is_cuda": False,
             "cuda_graph_fully_disabled": lambda: True, "check_cuda_graph_backend": lambda *a: False,
             "Phase": types.SimpleNamespace(PREFILL="prefill"), "Backend": types.SimpleNamespace(BREAKABLE="b"),
             "MAX_VERIFY_TOKENS": MAX_VERIFY_TOKENS}
    backend_cls = _backend_class(trees.patched, extra)
    flags = {}
    for role, draft, skip in (("target", False, False), ("draft", True, False), ("multi-step draft", True, True)):
        logged.clear()
        backend = backend_cls(_model_runner(draft), skip_prefill=skip)
        flags[role] = (backend.use_decode_grouped, any("decode attention" in m for m in logged))
    assert flags == {"target": (switch, switch), "draft": (False, False), "multi-step draft": (False, False)}


# ----------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("name", [c.name for c in CASES])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_compiled_on_gpu_matches_float64_reference(name: str, dtype: str):
    """The interpreter cases compiled on a GPU with the installed fork's module, fp16 and bf16, with the case's
    splits and the default plan, eagerly and captured in a CUDA graph (replayed into a NaN-poisoned output)."""
    module = installed_gpu_module(VERIFY, "the fork")
    if "HAS_EXTEND" not in module._verify_grouped_stage1.arg_names:
        pytest.skip("the installed fork predates patch 0035 (no decode mode)")
    case = BY_NAME[name]
    dt = getattr(torch, dtype)
    x = make_inputs(case)
    x["q"], x["key"] = x["q"].to(dt), x["key"].to(dt)
    x["value"] = x["key"][..., :x["lv"]] if case.mla else x["value"].to(dt)
    ref = reference(case, x)  # from the rounded inputs the GPU gets
    dev = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in x.items()}
    if case.mla:
        dev["value"] = dev["key"][..., :x["lv"]]
    limit = 1e-2 if dtype == "bfloat16" else 4e-3

    def call(o: torch.Tensor, **kw) -> None:
        module.verify_grouped_attention_fwd(dev["q"], None, None, o, paged(dev["key"], case.page),
                                            paged(dev["value"], case.page), dev["kv_indptr"], dev["kv_indices"], 1,
                                            x["sm_scale"], logit_cap=case.logit_cap, page_size=case.page, **kw)

    def check(o: torch.Tensor, what: str) -> None:
        out = o.double().cpu()
        assert not out.isnan().any(), f"{name} {dtype} {what}: NaN in the output"
        assert max_rel(out, ref) < limit, f"{name} {dtype} {what}: rel. err. {max_rel(out, ref)}"

    o = torch.full((len(case.lens), case.heads, x["lv"]), float("nan"), device="cuda", dtype=dt)
    call(o, max_kv_splits=case.max_splits, min_split_len=case.min_split_len)
    check(o, "case splits")
    o.fill_(float("nan"))
    call(o)
    check(o, "default plan")
    replay_in_cuda_graph(call, o)
    check(o, "graph replay")


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1])))

"""Patch 0032's MLA verify attention with TMA tiles (``sglang.kernels.ops.attention.verify_mla_tma``) on CPU.

The module is imported from the patched 0.5.17 tree (``trees.patched``). Its kernels run in a child process started
with ``TRITON_INTERPRET=1`` (Triton decides interpreted or compiled at its first import), fp16, against a float64
reference: K 1..8, H 8 and 16, bs 1-3, prefixes of one page, several pages, a partial last page and shorter than
one tile, split counts 1 (direct store), > 1 and > 8 with empty splits, a tree mask, and the ways to find a tile's
first row that can be interpreted (INDEX_AHEAD 1, the plain load; 3, the inline-asm load the GPU default uses,
cannot run in the interpreter). ``verify_mla_tma_fwd`` must return True (it ran) for every case. The full tiles go
through the host tensor descriptors (``desc.load``: the interpreter runs them; with the module's ``_descriptors``
giving descriptors over a zero buffer the output changes, so they are the path used) or, with ``use_tma`` False,
the pointer loads (the zero descriptors change nothing there). The unused rows of partial pages, a spare page and
every ``torch.empty`` are NaN-poisoned. Also in the child: the GPU bench's harness (fastpath_kernels.attention_tma.
bench, fake timer, tiny sizes), with patch 0007's comparison from the same tree.

In this process (the module imported, nothing launched): the calls it must refuse (return False, ``o`` untouched)
and ``verify_mla_tma_unsupported``'s reasons; the GPU default tile cross-compiled for sm_90 with the installed
Triton by ``fastpath_kernels.attention_tma.xcompile`` (TMA, wgmma, no cp.async, fits, at most 128 B of spills),
from the patch text, which must be the patched tree's file. Marked ``gpu``: the same cases compiled on a GPU with
the installed fork's module.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from fastpath_fixtures import installed_gpu_module, replay_in_cuda_graph, script_env
from sglang_trees import TreeImporter, trees  # noqa: F401 (trees: a module-scoped fixture)

MODULE = "sglang.kernels.ops.attention.verify_mla_tma"
# (name, lens, K, H, max_splits, min_split_len, tile, use_tma, tree)
CASES = [
    ("k1-h8-one-page-direct", [64], 1, 8, 1, 32, {"block_m": 16, "block_n": 32}, True, False),
    ("k4-h8-pages-split4", [200, 192], 4, 8, 4, 32, {"block_m": 32, "block_n": 32}, True, False),
    ("k8-h16-partial-split2", [130, 70, 5], 8, 16, 2, 64, {"block_m": 32, "block_n": 64}, True, False),
    ("k3-h16-bs3-direct-n16", [100, 257, 64], 3, 16, 1, 32, {"block_m": 64, "block_n": 16}, True, False),
    ("k5-h8-16-splits-empty", [700], 5, 8, 16, 32, {"block_m": 64, "block_n": 32}, True, False),
    ("k6-h8-tree-split2", [90, 128], 6, 8, 2, 32, {"block_m": 64, "block_n": 32}, True, True),
    ("k2-h16-short-prefixes", [1, 63], 2, 16, 2, 32, {"block_m": 32, "block_n": 32}, True, False),
    ("k7-h8-split4", [300, 129], 7, 8, 4, 32, {"block_m": 64, "block_n": 32}, True, False),
    ("k4-h16-pointer-loads", [200, 192], 4, 16, 4, 32, {"block_m": 32, "block_n": 32}, False, False),
]
INTERP_TILE = {"index_ahead": 1}  # INDEX_AHEAD 3 (the GPU default) is inline asm: not interpretable
ZERO_DESCRIPTOR_CASES = ("k4-h8-pages-split4", "k4-h16-pointer-loads")


def _poison_empty(torch) -> None:
    real = torch.empty

    def poisoned(*args, **kwargs):
        t = real(*args, **kwargs)
        return t.fill_(float("nan") if t.is_floating_point() else 2**30)

    torch.empty = poisoned


def _problem(torch, lens, k, heads, tree, seed):
    g = torch.Generator().manual_seed(seed)
    page = 64
    ppr = [-(-n // page) for n in lens]
    total = sum(ppr) + 1
    perm = torch.randperm(total, generator=g)
    kv = torch.randn(total * page, 1, 576, generator=g).half()
    kv[perm[-1] * page:(perm[-1] + 1) * page] = float("nan")  # a spare page
    slots, first = [], 0
    for n, p in zip(lens, ppr):
        pages = perm[first:first + p]
        first += p
        pos = torch.arange(n)
        slots.append(pages[pos // page] * page + pos % page)
        if n % page:
            kv[pages[-1] * page + n % page:(pages[-1] + 1) * page] = float("nan")
    bs = len(lens)
    q = torch.randn(bs * k, heads, 576, generator=g).half()
    k_ext = torch.randn(bs * k, 1, 576, generator=g).half()
    masks = []
    for _ in lens:
        m = torch.ones(k, k, dtype=torch.bool).tril()
        if tree:
            m = torch.eye(k, dtype=torch.bool)
            for i in range(1, k):
                j = int(torch.randint(0, i, (1,), generator=g))
                m[i] |= m[j]
        masks.append(m)
    full = [torch.cat([torch.ones(k, n, dtype=torch.bool), m], 1).flatten() for n, m in zip(lens, masks)]
    return {"kv": kv, "kv_indices": torch.cat(slots).long(), "q": q, "k_ext": k_ext,
            "kv_indptr": torch.tensor([0] + lens).cumsum(0).to(torch.int32), "masks": masks,
            "custom_mask": torch.cat(full).to(torch.uint8),
            "mask_indptr": torch.tensor([0] + [f.numel() for f in full]).cumsum(0).to(torch.int64)}


def _reference(torch, x, lens, k, scale):
    out = torch.empty(x["q"].shape[0], x["q"].shape[1], 512, dtype=torch.float64)
    indptr = x["kv_indptr"].tolist()
    for b, n in enumerate(lens):
        s = x["kv_indices"][indptr[b]:indptr[b + 1]]
        rows = slice(b * k, (b + 1) * k)
        keys = torch.cat([x["kv"][s, 0], x["k_ext"][rows, 0]]).double()
        seen = torch.cat([torch.ones(k, n, dtype=torch.bool), x["masks"][b]], 1)
        sc = torch.einsum("thd,nd->htn", x["q"][rows].double(), keys) * scale
        out[rows] = torch.einsum("htn,nd->thd", sc.masked_fill(~seen, float("-inf")).softmax(-1), keys[:, :512])
    return out


def _rel(out, ref) -> float:
    return float((out.double() - ref).abs().max() / ref.abs().max())


def _child(tree: str) -> dict:
    import torch

    vt = TreeImporter.module(Path(tree), MODULE)
    from fastpath_kernels.attention_tma import bench

    assert type(vt._verify_mla_tma_stage1).__name__ == "InterpretedFunction", type(vt._verify_mla_tma_stage1)
    _poison_empty(torch)
    results = {}
    for i, (name, lens, k, heads, splits, msl, tile, use_tma, tree_mask) in enumerate(CASES):
        x = _problem(torch, lens, k, heads, tree_mask, seed=i)
        scale = 576 ** -0.5
        extra = {"custom_mask": x["custom_mask"], "mask_indptr": x["mask_indptr"]} if tree_mask else {}
        tile = {**INTERP_TILE, **tile, "use_tma": use_tma}

        def call(o):
            return vt.verify_mla_tma_fwd(x["q"], x["k_ext"], x["k_ext"][..., :512], o, x["kv"], x["kv_indptr"],
                                         x["kv_indices"], k, scale, page_size=64, max_kv_splits=splits,
                                         min_split_len=msl, **extra, **tile)
        o = torch.full((len(lens) * k, heads, 512), float("nan"), dtype=torch.float16)
        ran = call(o)
        ref = _reference(torch, x, lens, k, scale)
        plan = vt.verify_mla_tma_plan(k, len(lens), heads, x["q"].device, splits, msl, **tile)
        rec = {"ran": ran, "rel": _rel(o, ref), "nan": bool(o.isnan().any()), "plan": plan,
               "splits_used": [min(max(-(-n // msl), 1), splits) for n in lens]}
        if name in ZERO_DESCRIPTOR_CASES:  # the module's descriptors over a zero buffer of the cache's shape
            real = vt._descriptors
            vt._descriptors = lambda kv_rows, block_n: real(torch.zeros_like(kv_rows), block_n)
            try:
                o2 = torch.full_like(o, float("nan"))
                rec["ran_zero_desc"] = call(o2)
            finally:
                vt._descriptors = real
            rec["rel_zero_desc"] = _rel(o2, ref)
        results[name] = rec
    # The GPU bench's harness at tiny sizes: DEVICE cpu, a fake timer that still runs the last call; the module and
    # patch 0007's kernel (grouped-p64) come from this tree, which TreeImporter makes ``sglang``.
    import tempfile

    import benchmark.tools.attn_verify_bench as timing  # the bench times and sizes its KV copies with these

    bench.DEVICE, timing.ROTATE_BYTES = "cpu", 1
    out = Path(tempfile.mkdtemp())
    lines = []
    rc = bench.main(["--out", str(out), "--heads", "8", "--bs", "1,2", "--ctx", "130", "--k", "4",
                     "--variants", "n32s4,n16s8", "--tile-override", json.dumps({**INTERP_TILE, "block_m": 32}),
                     "--min-calls", "2"],
                    timer=lambda calls: (calls[-1](), lines.append(len(calls)), (10.0, 9.0, 11.0))[2])
    results["_bench"] = {"rc": rc, "calls": lines, "json": json.loads((out / "results.json").read_text())}
    return results


@pytest.fixture(scope="module")
def results(trees) -> dict:  # noqa: F811
    done = subprocess.run([sys.executable, __file__, str(trees.patched)], env=script_env(TRITON_INTERPRET="1"),
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def module(trees):  # noqa: F811
    """The patched tree's module in this process (compiled kernels, never launched here)."""
    return TreeImporter.module(trees.patched, MODULE)


@pytest.mark.slow
@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_matches_float64_reference(results: dict, name: str):
    case = results[name]
    assert case["ran"] is True, f"{name}: verify_mla_tma_fwd refused the call ({case['plan']})"
    assert not case["nan"], f"{name}: NaN in the output (unwritten, or a poisoned row read)"
    assert case["rel"] < 4e-3, f"{name}: max relative error {case['rel']} ({case['plan']})"


@pytest.mark.slow
def test_cases_cover_the_brief(results: dict):
    lens = [n for c in CASES for n in c[1]]
    assert {c[2] for c in CASES} == set(range(1, 9)) and {c[3] for c in CASES} == {8, 16}
    assert {len(c[1]) for c in CASES} == {1, 2, 3}
    assert any(n % 64 for n in lens) and any(n == 64 for n in lens) and any(n > 256 for n in lens)
    used = [s for c in CASES for s in results[c[0]]["splits_used"]]
    assert 1 in used and max(used) > 8
    assert any(r["plan"]["max_kv_splits"] == 1 for k, r in results.items() if not k.startswith("_"))
    assert {results[c[0]]["plan"]["use_tma"] for c in CASES} == {True, False}


@pytest.mark.slow
def test_descriptor_path_is_the_one_used(results: dict):
    """Descriptors over a zero buffer change the output of the TMA path, and not that of the pointer loads."""
    tma, pointers = (results[name] for name in ZERO_DESCRIPTOR_CASES)
    assert tma["plan"]["use_tma"] and not pointers["plan"]["use_tma"]
    assert tma["ran_zero_desc"] and tma["rel_zero_desc"] > 0.05, tma
    assert pointers["ran_zero_desc"] and pointers["rel_zero_desc"] < 4e-3, pointers


@pytest.mark.slow
def test_gpu_bench_harness_on_cpu(results: dict):
    b = results["_bench"]
    assert b["rc"] == 0, b["json"]["notes"]
    recs = b["json"]["records"]
    variants = ("tma-p64", "tma-p64:n16s8", "grouped-p64")
    assert {(r["variant"], r["bs"]) for r in recs} == {(v, bs) for v in variants for bs in (1, 2)}, b["json"]["notes"]
    for r in recs:
        assert r["mode"] == "attn_verify" and r["metric"] == "latency_us" and r["k"] == 4 and r["ctx"] == 130
        assert r["heads"] == 8 and r["value"] == 10.0 and r["rel_err"] < 2e-2 and r["calls_per_graph"] == 2
        assert r["floor_us"] == round(r["bs"] * 130 * 576 * 2 / 4.8e12 * 1e6, 3) and r["gbps"] > 0
        if r["variant"] != "grouped-p64":
            assert r["tile"]["block_m"] == 32 and r["tile"]["index_ahead"] == 1 and r["tile"]["use_tma"], r["tile"]
    assert b["calls"] == [2] * 6
    assert not b["json"]["notes"], b["json"]["notes"]


def _inputs(torch, k: int = 4, lens=(100, 64)):
    x = _problem(torch, list(lens), k, 8, False, seed=0)
    o = torch.full((len(lens) * k, 8, 512), float("nan"), dtype=torch.float16)
    return x, o


# name, what the log's reason says, the change from a call the kernel serves
REFUSED = [
    ("cache-in-another-dtype", "torch.float32 cache under torch.float16", {"kv_dtype": "float32"}),
    ("logit-cap", "a logit cap", {"logit_cap": 30.0}),
    ("page-32-default-block-n", "page size 32", {"page_size": 32}),
    ("int32-indices-index-ahead-3", "torch.int32 kv_indices", {"index_dtype": "int32", "index_ahead": 3}),
    ("nine-draft-tokens", "9 draft tokens", {"k": 9}),
    ("draft-v-two-heads", "draft K/V with more than one head", {"v_heads": 2}),
]


@pytest.mark.parametrize("name,reason,change", REFUSED, ids=[r[0] for r in REFUSED])
def test_refuses_calls_it_cannot_serve(module, caplog, name: str, reason: str, change: dict):
    """verify_mla_tma_fwd returns False without running (o stays NaN) and says why in the log; the backend then
    runs patch 0007's kernel (test_verify_grouped_attention.py's dispatch rows)."""
    import torch

    x, o = _inputs(torch, k=change.get("k", 4))
    kv = x["kv"].to(getattr(torch, change.get("kv_dtype", "float16")))
    indices = x["kv_indices"].to(getattr(torch, change.get("index_dtype", "int64")))
    tile = {"index_ahead": change["index_ahead"]} if "index_ahead" in change else {}
    module._fall_back_once.cache_clear()
    with caplog.at_level(logging.WARNING, logger=module.logger.name):
        v_ext = x["k_ext"][..., :512].expand(-1, change.get("v_heads", 1), -1)
        ran = module.verify_mla_tma_fwd(x["q"], x["k_ext"], v_ext, o, kv, x["kv_indptr"], indices,
                                        change.get("k", 4), 576 ** -0.5, logit_cap=change.get("logit_cap", 0.0),
                                        page_size=change.get("page_size", 64), **tile)
    assert ran is False
    assert o.isnan().all(), f"{name}: o written by a refused call"
    assert any(reason in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_plan_takes_only_the_two_index_modes(module):
    """INDEX_AHEAD 3 (inline asm, the GPU default) or 1 (a plain load, interpretable); the prototype's 0 is gone."""
    import torch

    for mode in (1, 3):
        assert module.verify_mla_tma_plan(4, 1, 8, torch.device("cpu"), index_ahead=mode)["index_ahead"] == mode
    with pytest.raises(AssertionError):
        module.verify_mla_tma_plan(4, 1, 8, torch.device("cpu"), index_ahead=0)


def test_unsupported_says_why(module):
    import torch

    page_32 = module.verify_mla_tma_unsupported(32, torch.device("cuda", 0))
    assert page_32 and "32" in page_32 and "64" in page_32, page_32
    cpu = module.verify_mla_tma_unsupported(64, torch.device("cpu"))
    assert cpu and "CUDA" in cpu, cpu
    assert module.verify_mla_tma_unsupported(128, torch.device("cpu")) == cpu  # page 128 is fine, the CPU is not


def test_bench_tiles_are_module_tiles(module):
    from fastpath_kernels.attention_tma.bench import CANDIDATE_TILES

    assert {key for tile in CANDIDATE_TILES.values() for key in tile} <= set(module.DEFAULT_TILE)
    assert "n64s2" in CANDIDATE_TILES and all(CANDIDATE_TILES["n64s2"][k] == module.DEFAULT_TILE[k]
                                              for k in CANDIDATE_TILES["n64s2"])


def test_xcompile_compiles_the_patched_trees_files(trees):  # noqa: F811
    """xcompile takes the module (and patch 0007's, which it imports) from the patch texts: they must be the
    patched tree's files."""
    from benchmark.tools.attn_verify_bench import file_from_series
    from fastpath_kernels.attention_tma.xcompile import GROUPED_FILE, TMA_FILE
    from sglang_fastpath.paths import patches_dir

    for path in (TMA_FILE, GROUPED_FILE):
        assert file_from_series(path, patches_dir()) == (trees.patched / path).read_text()


def test_gpu_default_compiles_to_tma_and_wgmma_for_sm90(monkeypatch):
    """The GPU default tile at Kimi shapes (K=4, H 8 and 32), cross-compiled for sm_90 with the installed Triton:
    TMA loads, wgmma, two 64-token KV buffers within the H200's 227 KB, at most 128 B of spills (80-100 B with
    Triton 3.6-3.9: the tile was the fastest on the H200 all the same), and the index load not a cp.async."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    from fastpath_kernels.attention_tma.xcompile import compile_stage1, load_module

    vt = load_module()
    if type(vt._verify_mla_tma_stage1).__name__ != "JITFunction":
        pytest.skip("Triton was imported under TRITON_INTERPRET in this process")
    for heads in (8, 32):
        r = compile_stage1(90, 4, heads, 16, vt)
        assert r["tile"] == vt.DEFAULT_TILE, r
        assert r["tma"] and r["wgmma"] and not r["cp_async"], r
        assert 2 * 64 * 576 * 2 < r["shared"] <= 232448 and r["spill_bytes"] <= 128, r


@pytest.mark.gpu
@pytest.mark.parametrize("name", [c[0] for c in CASES])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_compiled_on_gpu_matches_float64_reference(name: str, dtype: str):
    """The interpreter cases compiled on a GPU with the installed fork's module, with the GPU's row-index load
    (INDEX_AHEAD 3, inline asm: never interpreted) unless a case sets its own, in fp16 and bf16; then the same
    inputs with the default tile and split rule, eagerly and captured in a CUDA graph (host-built TMA descriptors
    by value) and replayed."""
    import torch

    vt = installed_gpu_module(MODULE, "the fork with patch 0032")
    i = [c[0] for c in CASES].index(name)
    _, lens, k, heads, splits, msl, tile, use_tma, tree = CASES[i]
    dt = getattr(torch, dtype)
    x = {key: (v.to(dt) if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
         for key, v in _problem(torch, lens, k, heads, tree, seed=i).items()}
    ref = _reference(torch, x, lens, k, 576 ** -0.5)  # from the rounded inputs the GPU gets
    dev = {key: v.to("cuda") for key, v in x.items() if isinstance(v, torch.Tensor)}
    extra = {"custom_mask": dev["custom_mask"], "mask_indptr": dev["mask_indptr"]} if tree else {}

    def call(o: torch.Tensor, **tile_kw) -> None:
        ran = vt.verify_mla_tma_fwd(dev["q"], dev["k_ext"], dev["k_ext"][..., :512], o, dev["kv"], dev["kv_indptr"],
                                    dev["kv_indices"], k, 576 ** -0.5, page_size=64, use_tma=use_tma, **extra,
                                    **tile_kw)
        assert ran is True, f"{name} {dtype}: verify_mla_tma_fwd refused the call ({tile_kw})"

    def check(o: torch.Tensor, what: str) -> None:
        out = o.double().cpu()
        assert not out.isnan().any(), f"{name} {dtype} {what}: NaN in the output"
        rel = float((out - ref).abs().max() / ref.abs().max())
        assert rel < (1e-2 if dtype == "bfloat16" else 4e-3), f"{name} {dtype} {what}: rel. err. {rel}"

    o = torch.full((len(lens) * k, heads, 512), float("nan"), device="cuda", dtype=dt)
    call(o, max_kv_splits=splits, min_split_len=msl, **tile)
    check(o, "case tile")
    o.fill_(float("nan"))
    call(o)  # the default tile and split rule
    check(o, "default tile")
    replay_in_cuda_graph(call, o)
    check(o, "graph replay")


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1])))

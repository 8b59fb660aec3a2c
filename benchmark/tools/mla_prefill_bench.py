"""Check and time one MLA layer's prefill attention over a cached prefix: 0.5.17's absorbed MLA against patch 0048's
chunked-prefix MHA, on the Triton extend kernel, one GPU.

Run on a GPU host with the fork's site first on PYTHONPATH (``source test/gpu/device_env.sh``), the bundle built
with patch 0048:

    python3 -m benchmark.tools.mla_prefill_bench --out $OUT/mla-prefill --heads 64,8 --prefix 0,2048,8192,16384 \
        --extend 8192,512 --budget-s 100

One request: ``extend`` new tokens (the chunk being prefilled; 8192 by default) over ``prefix`` cached ones, Kimi's
attention shapes (kv_lora 512, rope 64, nope 128, v 128), ``heads`` query heads a rank (64 at TP 1, 8 at TP 8), bf16,
random inputs and ``kv_b_proj`` weight. Two variants compute the same attention:

- ``absorbed`` (what 0.5.17's Triton backend runs once any prefix is cached): the query absorbed into the latent space
  (``q_nope @ W_UK``, a bmm), ``extend_attention_fwd`` with 576-wide keys and 512-wide values over the latent cache
  (one KV head), the output taken back by ``W_UV`` (a bmm);
- ``chunked`` (patch 0048, SGLANG_ENABLE_TRITON_MLA_CHUNKED_PREFIX): the extend rows' and each prefix chunk's latent
  decompressed by ``kv_b_proj`` into 192-wide keys and 128-wide values per head, the patched
  ``TritonAttnBackend._forward_extend_chunked_prefix`` for the extend part and each chunk (LSE out), the states merged
  by sgl-kernel's ``merge_state_v2``, as ``forward_normal_chunked_kv_core`` does.

Each variant is checked against a float32 reference on two heads (relative error limit 2e-2) and against the other,
then timed with CUDA events (median of ``--reps`` after one untimed call). Each point carries its compute floor: the
multiply-adds of its attention and projections at the H200's dense bf16 peak. Writes ``results.json`` (records with
mode ``mla_prefill``, metric ``latency_us``, ``variant``, ``heads``, ``ctx`` = prefix, ``extend``, ``floor_us``,
``tflops``; ``checks``) and prints a table, ``chunked / absorbed`` last.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import types
from pathlib import Path
from typing import Callable

import torch

NOPE, ROPE, LORA, LV = 128, 64, 512, 128
PEAK_BF16_FLOPS = 989e12  # H200 SXM, dense
REL_LIMIT = 2e-2
DEVICE = "cuda"  # the CPU test sets "cpu"

Run = Callable[[], torch.Tensor]


def make_layer(heads: int, prefix: int, extend: int, seed: int, dtype: torch.dtype = torch.bfloat16) -> dict:
    """One request's inputs: the latent cache and rope keys of prefix + extend tokens, the extend tokens' query
    halves, and a kv_b_proj weight scaled so that the scores stay O(1)."""
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * scale).to(dtype).to(DEVICE)

    n = prefix + extend
    return {"heads": heads, "prefix": prefix, "extend": extend, "latent": rand(n, LORA), "k_pe": rand(n, ROPE),
            "q_nope": rand(extend, heads, NOPE), "q_pe": rand(extend, heads, ROPE),
            "kv_b": rand(heads * (NOPE + LV), LORA, scale=LORA ** -0.5), "scale": (NOPE + ROPE) ** -0.5}


def indptr(*lens: int) -> torch.Tensor:
    return torch.tensor([0, *lens], dtype=torch.int32, device=DEVICE).cumsum(0).to(torch.int32)


def absorbed(x: dict, extend_fwd: Callable) -> Run:
    """0.5.17's absorbed MLA: q_nope into the latent space, the extend kernel over 576/512-wide latent rows, W_UV."""
    heads, prefix, extend = x["heads"], x["prefix"], x["extend"]
    w = x["kv_b"].view(heads, NOPE + LV, LORA)
    w_uk, w_uv_t = w[:, :NOPE], w[:, NOPE:].transpose(1, 2)
    key = torch.cat([x["latent"], x["k_pe"]], -1)[:, None, :]  # the MLA pool's [slots, 1, 576]
    value = key[..., :LORA]  # its value buffer: a view of the first 512 columns
    k_ext, v_ext = key[prefix:].contiguous(), value[prefix:].contiguous()
    qo, kv = indptr(extend), indptr(prefix)
    kv_indices = torch.arange(prefix, dtype=torch.int64, device=DEVICE)
    o = torch.empty(extend, heads, LORA, dtype=key.dtype, device=DEVICE)

    def run() -> torch.Tensor:
        q = torch.cat([torch.bmm(x["q_nope"].transpose(0, 1), w_uk).transpose(0, 1), x["q_pe"]], -1)
        extend_fwd(q, k_ext, v_ext, o, key, value, qo, kv, kv_indices, None, True, None, extend, 1.0, 1.0, x["scale"])
        return torch.bmm(o.transpose(0, 1), w_uv_t).transpose(0, 1)

    return run


def chunked(x: dict, extend_fwd: Callable, chunk_fwd: Callable, merge: Callable, chunk: int) -> Run:
    """Patch 0048's chunked-prefix MHA: kv_b_proj decompression, the patched backend method for the extend part and
    each prefix chunk, LSE merges."""
    heads, prefix, extend = x["heads"], x["prefix"], x["extend"]
    q = torch.cat([x["q_nope"], x["q_pe"]], -1)  # the MHA query: q_b_proj's output, nope and rope halves
    bounds = [(a, min(a + chunk, prefix)) for a in range(0, prefix, chunk)]
    backend = types.SimpleNamespace(extend_attention_fwd=extend_fwd, forward_metadata=types.SimpleNamespace(
        qo_indptr=indptr(extend), kv_indptr=indptr(prefix),
        kv_indices=torch.zeros(prefix, dtype=torch.int64, device=DEVICE), max_extend_len=extend))
    layer = types.SimpleNamespace(tp_q_head_num=heads, qk_head_dim=NOPE + ROPE, v_head_dim=LV, scaling=x["scale"])
    batch = types.SimpleNamespace(mha_return_lse=True, attn_attend_prefix_cache=False, prefix_chunk_idx=None,
                                  prefix_chunk_cu_seq_lens=[indptr(b - a) for a, b in bounds],
                                  prefix_chunk_has_zero_kv=[False] * len(bounds))

    def decompress(a: int, b: int) -> tuple[torch.Tensor, torch.Tensor]:
        kv = (x["latent"][a:b] @ x["kv_b"].T).view(b - a, heads, NOPE + LV)
        k = torch.empty(b - a, heads, NOPE + ROPE, dtype=kv.dtype, device=DEVICE)
        k[..., :NOPE] = kv[..., :NOPE]
        k[..., NOPE:] = x["k_pe"][a:b, None, :]
        return k, kv[..., NOPE:]

    def call(k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        o = q.new_empty(extend, heads * LV)
        return chunk_fwd(backend, q, k, v, o, layer, batch, 0.0)

    def run() -> torch.Tensor:
        batch.attn_attend_prefix_cache = False
        o, lse = call(*decompress(prefix, prefix + extend))
        batch.attn_attend_prefix_cache = True
        for i, (a, b) in enumerate(bounds):
            batch.prefix_chunk_idx = i
            o, lse = merge(*call(*decompress(a, b)), o, lse)
        return o

    return run


def reference(x: dict, heads: list[int]) -> torch.Tensor:
    """Float32 attention of the extend queries over prefix and, causally, extend keys, for ``heads`` only."""
    prefix, extend = x["prefix"], x["extend"]
    w = x["kv_b"].float().view(x["heads"], NOPE + LV, LORA)[heads]
    latent = x["latent"].float()
    k = torch.cat([torch.einsum("nl,hdl->nhd", latent, w[:, :NOPE]),
                   x["k_pe"].float()[:, None, :].expand(-1, len(heads), -1)], -1)
    v = torch.einsum("nl,hdl->nhd", latent, w[:, NOPE:])
    q = torch.cat([x["q_nope"], x["q_pe"]], -1)[:, heads].float()
    scores = torch.einsum("qhd,khd->hqk", q, k) * x["scale"]
    allowed = torch.arange(prefix + extend, device=DEVICE)[None, :] <= (
        prefix + torch.arange(extend, device=DEVICE))[:, None]
    return torch.einsum("hqk,khd->qhd", scores.masked_fill(~allowed, float("-inf")).softmax(-1), v)


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).abs().max() / b.float().abs().max())


def multiply_adds(variant: str, heads: int, prefix: int, extend: int) -> float:
    """The attention's query-key pairs (the extend part causal) times the multiply-adds a pair costs, plus the
    projections the variant adds: absorbed the two bmms; chunked kv_b_proj over prefix and extend rows."""
    pairs = heads * extend * (prefix + (extend + 1) / 2)
    if variant == "absorbed":
        return pairs * ((LORA + ROPE) + LORA) + 2 * extend * heads * NOPE * LORA
    return pairs * (NOPE + ROPE + LV) + (prefix + extend) * LORA * heads * (NOPE + LV)


def time_us(run: Run, reps: int) -> list[float]:
    run()
    samples = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)
    return samples


def point(x: dict, runs: dict[str, Run], reps: int, timed: bool) -> tuple[list[dict], dict]:
    """Check both variants, then time them; the records and the check."""
    ref_heads = [0, x["heads"] - 1]
    outs = {name: run() for name, run in runs.items()}
    ref = reference(x, ref_heads)
    check = {"heads": x["heads"], "ctx": x["prefix"], "extend": x["extend"],
             **{f"rel_{name}": rel_err(out[:, ref_heads], ref) for name, out in outs.items()},
             "rel_between": rel_err(outs["chunked"], outs["absorbed"])}
    check["ok"] = all(v <= REL_LIMIT for k, v in check.items() if k.startswith("rel_"))
    records = []
    for name, run in runs.items() if timed and check["ok"] else ():
        samples = time_us(run, reps)
        med = statistics.median(samples)
        work = 2 * multiply_adds(name, x["heads"], x["prefix"], x["extend"])
        records.append({"mode": "mla_prefill", "metric": "latency_us", "value": round(med, 1), "variant": name,
                        "bs": 1, "heads": x["heads"], "ctx": x["prefix"], "extend": x["extend"],
                        "floor_us": round(work / PEAK_BF16_FLOPS * 1e6, 1), "tflops": round(work / med / 1e6, 1),
                        "n": reps, "samples_us": [round(s, 1) for s in samples]})
    return records, check


def torch_merge(o_a: torch.Tensor, lse_a: torch.Tensor, o_b: torch.Tensor, lse_b: torch.Tensor) -> tuple:
    """merge_state_v2's arithmetic in torch (natural-log LSE by token and head; -inf takes no weight)."""
    top = torch.maximum(lse_a, lse_b)
    w_a, w_b = torch.exp(lse_a - top), torch.exp(lse_b - top)
    total = w_a + w_b
    o = o_a.float() * (w_a / total)[..., None] + o_b.float() * (w_b / total)[..., None]
    return o.to(o_a.dtype), torch.log(total) + top


def installed_kernels() -> tuple[Callable, Callable, Callable, str]:
    """The fork's extend kernel, patch 0048's backend method and sgl-kernel's merge (torch's where it is missing)."""
    from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd
    from sglang.srt.layers.attention.triton_backend import TritonAttnBackend

    chunk_fwd = getattr(TritonAttnBackend, "_forward_extend_chunked_prefix", None)
    if chunk_fwd is None:
        raise SystemExit("mla_prefill_bench: this sglang has no patch 0048 (_forward_extend_chunked_prefix)")
    try:
        from sgl_kernel import merge_state_v2
    except ImportError:
        return extend_attention_fwd, chunk_fwd, torch_merge, "torch"
    return extend_attention_fwd, chunk_fwd, merge_state_v2, "merge_state_v2"


def table(records: list[dict]) -> str:
    by = {(r["heads"], r["ctx"], r["extend"], r["variant"]): r for r in records}
    lines = ["heads  prefix  extend  absorbed us (floor, TFLOP/s)   chunked us (floor, TFLOP/s)   chunked/absorbed"]
    for h, c, e in sorted({k[:3] for k in by}):
        a, m = by.get((h, c, e, "absorbed")), by.get((h, c, e, "chunked"))
        cell = [f"{r['value']:>10.1f} ({r['floor_us']:.1f}, {r['tflops']:.0f})" if r else "-" for r in (a, m)]
        ratio = f"{m['value'] / a['value']:.2f}" if a and m else "-"
        lines.append(f"{h:>5}  {c:>6}  {e:>6}  {cell[0]:<29}  {cell[1]:<28}  {ratio}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for results.json")
    ap.add_argument("--heads", default="64,8", help="query heads a rank, comma-separated (64: TP 1; 8: TP 8)")
    ap.add_argument("--prefix", default="8192,16384", help="cached prefix lengths, comma-separated")
    ap.add_argument("--extend", default="8192", help="new tokens (the chunk being prefilled), comma-separated")
    ap.add_argument("--chunk", type=int, default=128 * 1024, help="prefix tokens a chunk (SGLANG_MAX_KV_CHUNK_CAPACITY)")
    ap.add_argument("--reps", type=int, default=5, help="timed calls a variant and point")
    ap.add_argument("--budget-s", type=float, default=120.0, help="start no new point after this many seconds")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    extend_fwd, chunk_fwd, merge, merge_name = installed_kernels()
    args.out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.budget_s
    records, checks = [], []
    points = [(h, p, e) for h in map(int, args.heads.split(",")) for e in map(int, args.extend.split(","))
              for p in map(int, args.prefix.split(","))]
    for heads, prefix, extend in points:
        if time.monotonic() > deadline:
            checks.append({"heads": heads, "ctx": prefix, "extend": extend, "skipped": "budget"})
            continue
        x = make_layer(heads, prefix, extend, seed=heads * 100003 + prefix + 7 * extend)
        runs = {"absorbed": absorbed(x, extend_fwd), "chunked": chunked(x, extend_fwd, chunk_fwd, merge, args.chunk)}
        got, check = point(x, runs, args.reps, timed=True)
        records += got
        checks.append(check)
        print(json.dumps(check), flush=True)
        del x, runs
        torch.cuda.empty_cache()
    (args.out / "results.json").write_text(json.dumps(
        {"records": records, "checks": checks, "merge": merge_name, "device": torch.cuda.get_device_name(),
         "peak_bf16_flops": PEAK_BF16_FLOPS}, indent=1))
    print(table(records))
    return 0 if all(c.get("ok", True) for c in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""benchmark/tools/mla_prefill_bench.py on CPU: its two variants (0.5.17's absorbed MLA; patch 0048's chunked-prefix
MHA through the patched backend method, merged by LSE) agree with each other and with its float32 reference, under
``TRITON_INTERPRET=1`` at a small size with the prefix over several chunks, so that its GPU figures compare one
attention computed two ways. The kernels come from the patched tree (the device takes them from the installed fork);
the merge is the tool's torch one (sgl-kernel's needs CUDA). Timing needs a GPU and is not run here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from sglang_trees import load_defs, source
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_verify_grouped_attention import BACKEND, interpreted_results, load_kernels

from benchmark.tools import mla_prefill_bench as bench


def _child(tree: str) -> list[dict]:
    """In the TRITON_INTERPRET=1 process."""
    bench.DEVICE = "cpu"
    _, extend = load_kernels(Path(tree))
    method = load_defs(source(Path(tree), BACKEND), ["TritonAttnBackend._forward_extend_chunked_prefix"],
                       {"MAX_VERIFY_TOKENS": 8})["TritonAttnBackend._forward_extend_chunked_prefix"]
    out = []
    for name, prefix in (("small", 40), ("no-prefix", 0)):  # three prefix chunks; a first chunk (no chunk at all)
        x = bench.make_layer(heads=3, prefix=prefix, extend=12, seed=7, dtype=torch.float16)
        runs = {"absorbed": bench.absorbed(x, extend),
                "chunked": bench.chunked(x, extend, method, bench.torch_merge, 16)}
        records, check = bench.point(x, runs, reps=0, timed=False)
        out.append({"case": {"name": name}, "records": records, **check})
    return out


@pytest.fixture(scope="module")
def results(trees) -> dict[str, dict]:  # noqa: F811
    return interpreted_results(__file__, trees.patched)


@pytest.mark.slow  # the TRITON_INTERPRET child process, about 10 s on 2 cores
@pytest.mark.parametrize("name", ["small", "no-prefix"])
def test_both_variants_compute_the_same_attention(results: dict[str, dict], name: str) -> None:
    r = results[name]
    assert r["ok"] and r["records"] == [], r  # checked, not timed
    assert r["rel_absorbed"] < 5e-3 and r["rel_chunked"] < 5e-3 and r["rel_between"] < 5e-3, r


def test_the_floor_counts_each_variant_s_work() -> None:
    pairs = 2 * 4 * (10 + 2.5)  # 2 heads, 4 extend tokens over 10 cached: 10 + (4 + 1) / 2 keys each
    assert bench.multiply_adds("absorbed", 2, 10, 4) == pairs * 1088 + 2 * 4 * 2 * 128 * 512
    assert bench.multiply_adds("chunked", 2, 10, 4) == pairs * 320 + 14 * 512 * 2 * 256


def test_the_table_puts_the_ratio_last() -> None:
    rec = {"heads": 64, "ctx": 8192, "extend": 8192, "floor_us": 1.0, "tflops": 100.0}
    text = bench.table([{**rec, "variant": "absorbed", "value": 200.0}, {**rec, "variant": "chunked", "value": 50.0}])
    assert text.splitlines()[-1].split()[-1] == "0.25"


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1])))

"""Patch 0036 (0.5.17; 0026 of the 0.5.23 port): the Triton backend counts MLA's one latent KV head in its decode split heuristic.

``TritonAttnBackend.num_kv_head`` came from the config's ``num_key_value_heads`` (64 on Kimi at TP 1, 8 a rank at TP
8), which MLA's absorbed decode does not read: it attends every query head to one latent KV head, launching
``bs x cdiv(heads, 16)`` programs per split. ``get_num_kv_splits_triton`` takes ``heads / kv_heads`` = 1 for "no
grouping" and plans ``bs x heads`` programs, so it picks ``heads / cdiv(heads, 16)`` times too few splits (16x at 64
heads, 8x at 8). On an H200 that made SGLang's decode kernel 74 / 430 us a layer at bs 1 / 8 with 8k of context on
kimi16 against 65 / 187 us with one KV head (benchmark/results/20261204-0446-h200-tp1-kimi16-8k-grouped-decode/).

CPU checks: the backend's expression for ``num_kv_head``, evaluated from the tree's own source, gives 1 for MLA and the
per-rank KV heads otherwise; and the tree's heuristic itself, under ``TRITON_INTERPRET=1`` in a child process, fills an
H200 (132 SMs) with MLA's real grid at bs 1 / 8 / 32 and 8k tokens once it is told one KV head (the release: bs 8
gets 2 splits, 64 programs).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastpath_fixtures import script_env
from sglang_trees import PATCHED_AND_PRISTINE, find_def, source
from sglang_trees import trees  # noqa: F401 (a fixture)

BACKEND = "sglang.srt.layers.attention.triton_backend"
TREES = PATCHED_AND_PRISTINE
ALL = ["patched", "upstream", "pristine", "upstream_pristine"]
HEADS, CONFIG_KV_HEADS, CORES, MAX_SPLITS, CTX = 64, 64, 132, 256, 8192  # Kimi's MLA at TP 1 on an H200


def num_kv_head_expr(tree: Path) -> ast.expr:
    """The value assigned to ``self.num_kv_head`` in ``TritonAttnBackend.__init__``."""
    init = find_def(tree, BACKEND, "TritonAttnBackend.__init__")
    return next(n.value for n in ast.walk(init) if isinstance(n, ast.Assign) and len(n.targets) == 1
                and ast.unparse(n.targets[0]) == "self.num_kv_head")


def backend_num_kv_head(tree: Path, use_mla: bool, config_kv_heads: int, tp: int) -> int:
    model_config = SimpleNamespace(get_num_kv_heads=lambda tp_size, dcp_size=1: max(1, config_kv_heads // tp_size))
    scope = {"self": SimpleNamespace(use_mla=use_mla), "model_runner": SimpleNamespace(model_config=model_config),
             "get_parallel": lambda: SimpleNamespace(attn_tp_size=tp, attn_dcp_size=1)}
    return eval(compile(ast.Expression(num_kv_head_expr(tree)), "num_kv_head", "eval"), scope)  # noqa: S307


@pytest.mark.parametrize("tree_name", TREES)
@pytest.mark.parametrize("tp", [1, 8])
def test_mla_counts_one_kv_head(trees, tree_name: str, tp: int) -> None:
    assert backend_num_kv_head(trees.get(tree_name), use_mla=True, config_kv_heads=CONFIG_KV_HEADS, tp=tp) == 1


@pytest.mark.parametrize("tree_name", ALL)
def test_other_attention_keeps_the_kv_heads_a_rank(trees, tree_name: str) -> None:
    tree = trees.get(tree_name)
    assert backend_num_kv_head(tree, use_mla=False, config_kv_heads=8, tp=1) == 8
    assert backend_num_kv_head(tree, use_mla=False, config_kv_heads=8, tp=4) == 2


# --- the tree's heuristic, interpreted --------------------------------------------------------------


def _splits(tree: str, num_kv_head: int) -> dict[int, int]:
    """bs -> the split count the tree's get_num_kv_splits_triton picks for Kimi's MLA at CTX tokens."""
    import torch

    path = source(Path(tree), "sglang.kernels.ops.attention.metadata")
    spec = importlib.util.spec_from_file_location("fastpath_kv_splits_metadata", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = {}
    for bs in (1, 8, 32):
        splits = torch.zeros(bs, dtype=torch.int32)
        seq_lens = torch.full((bs,), CTX, dtype=torch.int32)
        module.get_num_kv_splits_triton[(1,)](splits, seq_lens, bs, 1, HEADS, num_kv_head, MAX_SPLITS, CORES,
                                              MAX_NUM_SEQ=256)
        assert len(set(splits.tolist())) == 1
        out[bs] = int(splits[0])
    return out


@pytest.fixture(scope="module")
def interpreted(trees) -> dict[str, dict[str, dict[str, int]]]:  # noqa: F811
    """For each tree: the split counts with the backend's num_kv_head for MLA, in one interpreted child."""
    args = [json.dumps({name: [str(trees.get(name)), backend_num_kv_head(trees.get(name), True, CONFIG_KV_HEADS, 1)]
                        for name in ALL})]
    done = subprocess.run([sys.executable, __file__, *args], env=script_env(TRITON_INTERPRET="1"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("tree_name", TREES)
def test_the_mla_decode_grid_fills_the_device(interpreted, tree_name: str) -> None:
    programs_a_split = -(-HEADS // 16)  # _decode_grouped_att_m_fwd: BLOCK_H 16 over one KV head's 64 query heads
    for bs, splits in interpreted[tree_name].items():
        assert 1 <= splits <= MAX_SPLITS
        assert int(bs) * programs_a_split * splits >= CORES, (tree_name, bs, splits)


def test_the_releases_pick_two_splits_at_bs_8(interpreted) -> None:
    # The figure behind the e2e gap: 64 working programs on 132 SMs, 129 KV tiles each.
    for name in ("pristine", "upstream_pristine"):
        assert interpreted[name]["8"] == 2
    for name in ("patched", "upstream"):
        assert interpreted[name]["8"] > 16


if __name__ == "__main__":
    trees_arg = json.loads(sys.argv[1])
    print(json.dumps({name: _splits(tree, kv) for name, (tree, kv) in trees_arg.items()}))

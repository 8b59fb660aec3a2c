"""KV pool sizing with an MHA EAGLE-3 draft on an MLA target (patch 0009), on CPU.

Runs ``DefaultPoolConfigurator.__init__`` of the tree, executed from its source
file, on a stand-in KV cache configurator: a Kimi-shaped MLA target (4 layers,
kv_lora_rank 512 + rope 64, bf16) with a 1-layer EAGLE-3 draft of 64 KV heads
of 128 dims (MHA), at attention TP 1 and 2. The bytes per token the pool
budget divides by must hold the draft's own pool (2 x heads/TP x 128 x 2
bytes per token); pristine 0.5.17 and 0.5.23 scale the MLA cell by 1 + 1/4
instead, so the draft's pool (sized with the target's token count) runs out of
memory at start-up (xfail). Runs on the patched 0.5.17 tree and on the upstream
port (0.5.23 + patches/upstream/v0.5.23).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from sglang_trees import (  # noqa: F401 (trees: a module-scoped fixture)
    PATCHED,
    PATCHED_AND_PRISTINE,
    TreeImporter,
    load_defs,
    source,
    trees,
)

POOL_CONFIGURATOR = "sglang.srt.model_executor.pool_configurator"
MLA_CELL_PER_LAYER = (512 + 64) * 2  # bytes per token per layer, bf16
TARGET_LAYERS = 4
ARCH = SimpleNamespace(MLA="mla", MHA="mha")


def draft_config(kv_heads: int, head_dim: int, arch: str = "mha") -> SimpleNamespace:
    return SimpleNamespace(attention_arch=arch, head_dim=head_dim, v_head_dim=head_dim,
                           get_num_kv_heads=lambda tp: max(1, kv_heads // tp))  # fmt: skip


def cell_size(tree: Path, draft: SimpleNamespace | None, tp: int, use_mla: bool = True) -> int:
    """Bytes per token the tree's DefaultPoolConfigurator budgets for target + draft."""
    TreeImporter.use(tree)
    init = load_defs(
        source(tree, POOL_CONFIGURATOR),
        ["DefaultPoolConfigurator.__init__"],
        {"mambaish_config": lambda model_config: None, "AttentionArch": ARCH,
         "get_parallel": lambda: SimpleNamespace(attn_tp_size=tp, attn_dcp_size=1),
         # 0.5.23 reads these too
         "is_deepseek_dsa": lambda hf_config: False, "compute_page_shard_scratch_bytes": lambda kvc, include_mtp: 0,
         "get_schedule": lambda: SimpleNamespace(max_total_tokens=None),
         "get_memory": lambda: SimpleNamespace(enable_hisparse=False)},
    )["DefaultPoolConfigurator.__init__"]  # fmt: skip
    target_cell = MLA_CELL_PER_LAYER * TARGET_LAYERS
    spec = SimpleNamespace(is_eagle=lambda: True, is_standalone=lambda: False, is_dflash_family=lambda: False)
    kvc = SimpleNamespace(
        kv_cache_dtype_str="auto", kv_cache_dtype=torch.bfloat16,
        model_config=SimpleNamespace(context_len=4096, hf_config=None),
        layer_info=SimpleNamespace(num_effective_layers=TARGET_LAYERS), ps=SimpleNamespace(pp_size=1),
        server_args=SimpleNamespace(max_total_tokens=None, dcp_size=1), spec_algorithm=spec, is_draft_worker=False,
        use_mla_backend=use_mla, draft_attn_tp_size=tp, fused_entry_bytes=lambda sub_pool: None,
        # 0.5.17's patch keeps the draft's config as eagle_draft_model_config; 0.5.23 has draft_model_config
        spec_aux_config=SimpleNamespace(eagle_draft_num_layers=1, eagle_draft_model_config=draft,
                                        draft_model_config=draft),
    )  # fmt: skip
    configurator = SimpleNamespace(_compute_cell_size=lambda kvc, num_layers: target_cell)
    init(configurator, kvc)
    return configurator._cell_size


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
@pytest.mark.parametrize("tp", [1, 2])
def test_mha_draft_on_mla_target_is_budgeted_with_its_own_heads(trees, tree_name: str, tp: int) -> None:
    draft_bytes = 1 * (64 // tp) * (128 + 128) * 2
    got = cell_size(trees.get(tree_name), draft_config(64, 128), tp)
    assert got == MLA_CELL_PER_LAYER * TARGET_LAYERS + draft_bytes


@pytest.mark.parametrize("tree_name", PATCHED)
def test_mla_draft_keeps_the_proportional_scaling(trees, tree_name: str) -> None:
    # An MTP/NextN draft shares the target's MLA layer: one more layer of the same size.
    got = cell_size(trees.get(tree_name), draft_config(1, 192, arch="mla"), tp=1)
    assert got == MLA_CELL_PER_LAYER * (TARGET_LAYERS + 1)


@pytest.mark.parametrize("tree_name", PATCHED)
def test_mha_target_keeps_the_proportional_scaling(trees, tree_name: str) -> None:
    got = cell_size(trees.get(tree_name), draft_config(8, 128), tp=1, use_mla=False)
    assert got == int(MLA_CELL_PER_LAYER * TARGET_LAYERS * 1.25)

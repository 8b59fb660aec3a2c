"""The model factory's parts: INT4 packing, the oracle walk at every width, the shard writer, seeding."""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from eagle3_reference import rms_norm
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.models import int4
from sglang_fastpath.models.checkpoint import INDEX_FILE, write_checkpoint
from sglang_fastpath.models.tensors import StableRng, TensorFactory
from sglang_fastpath.models.walk import LOGIT_MARGIN, code_sizes, make_walk


def test_int4_pack_matches_compressed_tensors_layout() -> None:
    """Element k of a word sits in bits 4k..4k+3, stored as value + 8 (compressed-tensors pack_to_int32)."""
    q = torch.tensor([[-8, -7, -6, -5, -4, -3, -2, -1], [0, 1, 2, 3, 4, 5, 6, 7]], dtype=torch.int8)
    words = int4.pack(q)
    assert words.dtype == torch.int32 and words.shape == (2, 1)
    assert int(words[0, 0]) == 0x76543210
    assert int(words[1, 0]) & 0xFFFFFFFF == 0xFEDCBA98
    assert torch.equal(int4.unpack(words), q)
    assert torch.equal(int4.unpack(torch.full((3, 4), int4.ZERO_WORD, dtype=torch.int32)),
                       torch.zeros(3, 32, dtype=torch.int8))


def test_int4_round_trips() -> None:
    gen = torch.Generator().manual_seed(0)
    q = torch.randint(-8, 8, (64, 256), generator=gen, dtype=torch.int8)
    assert torch.equal(int4.unpack(int4.pack(q)), q)
    w = torch.randn(64, 256, generator=gen) * 0.05
    qw, scale = int4.quantize(w)
    assert qw.dtype == torch.int8 and int(qw.min()) >= -8 and int(qw.max()) <= 7
    assert scale.shape == (64, 256 // int4.GROUP_SIZE) and scale.dtype == torch.bfloat16
    err = (int4.dequantize(qw, scale) - w).abs().view(64, -1, int4.GROUP_SIZE)
    # half a step, plus the clamp at +7 when the bf16-rounded scale makes the largest value 7.5+ steps
    assert bool((err <= scale.float().unsqueeze(-1) * 0.55).all())
    with pytest.raises(ValueError):
        int4.quantize(torch.zeros(4, 48))


def test_code_sizes_are_coprime_and_within_budget() -> None:
    for wanted, coords, neurons in ((4096, 511, 1536), (32000, 4095, 14336), (500, 63, 128), (2047, 255, 512)):
        a, b = code_sizes(wanted, coords, neurons)
        assert math.gcd(a, b) == 1 and 2 <= a <= b and a + b <= coords and 2 * (a + b) <= neurons
        assert a * b <= wanted and a * b > 0.9 * min(wanted, coords * coords // 4)
    assert code_sizes(32000, 4095, 14336) == (125, 256)
    with pytest.raises(FastpathError):
        code_sizes(1000, 4, 8)


@pytest.mark.parametrize("hidden", [64, 1024, 4096, 7168])
def test_walk_is_exact_at_every_width(hidden: int) -> None:
    """Target logits and four draft steps of the walk, in bf16 like the served model (attention output zero)."""
    dt, vocab, inter = torch.bfloat16, 2000, 1024
    walk = make_walk(3, hidden, vocab, list(range(3, vocab)), 1000, inter)
    cpu = torch.device("cpu")
    embed, head = walk.embedding(cpu).to(dt), walk.target_head(cpu).to(dt)
    ones = torch.ones(hidden)
    x = torch.randint(0, vocab, (256,), generator=torch.Generator().manual_seed(hidden))
    logits = (rms_norm(embed[x], ones, 1e-5) @ head.T).float().topk(2, dim=-1)
    assert torch.equal(logits.indices[:, 0], walk.next_token[x])
    assert bool((logits.values[:, 0] - logits.values[:, 1] >= LOGIT_MARGIN - 1).all())
    mlp = {k: v.to(dt) for k, v in walk.draft_mlp(inter, cpu).items()}
    state = (torch.cat([embed[x]] * 3, dim=-1) @ walk.draft_fc(3, cpu).to(dt).T)
    draft_head, cur = walk.draft_head(cpu).to(dt), walk.next_token[x]
    for _ in range(4):
        h = rms_norm(state, ones, 1e-5)
        out = (torch.nn.functional.silu(h @ mlp["gate"].T) * (h @ mlp["up"].T)) @ mlp["down"].T
        state = (out.float() + state.float()).to(dt)
        top = (rms_norm(state, ones, 1e-5) @ draft_head.T).float().topk(2, dim=-1)
        cur = walk.next_token[cur]
        assert torch.equal(walk.hot[top.indices[:, 0]], cur)
        assert bool((top.values[:, 0] - top.values[:, 1] >= LOGIT_MARGIN - 2).all())


def test_shards_and_index_are_deterministic(tmp_path) -> None:
    def specs(seed: int):
        f = TensorFactory(seed)
        return [f.normal("a.weight", (64, 64), 1.0), f.normal("b.weight", (64, 64), 1.0),
                f.fill("c.weight", (64,), 1.0), f.random_bytes("d.weight_packed", (8, 4), torch.int32)]

    info = write_checkpoint(tmp_path / "one", specs(0), max_shard_bytes=9000)
    assert info.files == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", INDEX_FILE]
    index = json.loads((tmp_path / "one" / INDEX_FILE).read_text())
    assert index["metadata"]["total_size"] == info.total_bytes == 2 * 64 * 64 * 2 + 64 * 2 + 8 * 4 * 4
    loaded = {}
    for shard in info.files[:-1]:
        loaded.update(load_file(tmp_path / "one" / shard))
    assert set(index["weight_map"]) == set(loaded) == {"a.weight", "b.weight", "c.weight", "d.weight_packed"}
    assert torch.equal(loaded["a.weight"], specs(0)[0].make())
    write_checkpoint(tmp_path / "two", specs(0), max_shard_bytes=9000)
    for name in info.files:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    single = write_checkpoint(tmp_path / "three", specs(1))
    assert single.files == ["model.safetensors"]
    assert not torch.equal(load_file(tmp_path / "three" / "model.safetensors")["a.weight"], loaded["a.weight"])


def test_seeding_is_per_name_and_stable() -> None:
    f = TensorFactory(5)
    a1, a2, b = (f.normal(n, (4, 4), 1.0).make() for n in ("a", "a", "b"))
    assert torch.equal(a1, a2) and not torch.equal(a1, b)
    # StableRng rests on random.random(), whose sequence Python guarantees: these values must never change.
    assert StableRng(0, "walk/coords").permutation(8) == [1, 0, 2, 4, 6, 5, 7, 3]
    assert sorted(StableRng(1, "x").sample(list(range(100)), 10)) == sorted(set(StableRng(1, "x").sample(
        list(range(100)), 10)))


def test_aux_layer_ids_are_three_distinct_capturable_layers() -> None:
    """SGLang captures each listed layer once: a repeated id starves the draft's fc (seen on an H200)."""
    from sglang_fastpath.models.shapes import aux_layer_ids

    for layers in range(4, 65):
        ids = aux_layer_ids(layers)
        llama = [i + 1 for i in ids]  # LlamaForCausalLM.set_eagle3_layers_to_capture
        deepseek = llama if ids[0] == 1 else list(ids)  # DeepseekV2ForCausalLM's rule
        for captured in (llama, deepseek):
            assert len(set(captured)) == 3 and max(captured) < layers, (layers, ids)
    with pytest.raises(ValueError, match="at least 4 layers"):
        aux_layer_ids(3)


def test_zero_specs_are_holes_that_safetensors_reads_as_zeros(tmp_path) -> None:
    """``write_checkpoint`` leaves a ``zeros`` spec unwritten (a sparse file); safetensors' own reader sees
    the same tensors as from its ``save_file``, zeros included, and never calls the spec's ``make``."""
    import os

    from safetensors.torch import load_file, save_file

    from sglang_fastpath.models.checkpoint import write_checkpoint
    from sglang_fastpath.models.tensors import TensorFactory, TensorSpec

    factory = TensorFactory(0)

    def never() -> torch.Tensor:
        raise AssertionError("a zeros spec was drawn")

    specs = [factory.normal("a", (3, 5), 1.0), factory.zeros("experts.w", (1024, 1024), torch.int32),
             TensorSpec("shape", (2,), torch.int64, lambda: torch.tensor([7, 9])),
             TensorSpec("experts.s", (512, 1024), torch.bfloat16, never, zeros=True),
             factory.fill("b", (4,), 1.0), factory.zeros("tail", (4096,), torch.float32)]
    info = write_checkpoint(tmp_path / "m", specs)
    path = tmp_path / "m" / info.files[0]
    got = load_file(str(path))
    dense = {s.name: torch.zeros(s.shape, dtype=s.dtype) if s.zeros else s.make() for s in specs}
    save_file(dense, str(tmp_path / "dense.safetensors"))
    want = load_file(str(tmp_path / "dense.safetensors"))
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) and got[k].dtype == want[k].dtype
                                             for k in want)
    assert info.total_bytes == sum(s.nbytes for s in specs)
    probe = tmp_path / "probe"
    with open(probe, "wb") as f:
        f.truncate(1 << 22)
    if os.stat(probe).st_blocks * 512 < 1 << 22:  # the filesystem keeps holes
        assert os.stat(path).st_blocks * 512 < 1 << 20  # 5 MB of tensors, under 1 MB on disk

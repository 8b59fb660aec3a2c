"""The shapes of the models the factory makes, validated at construction (no torch needed).

Kept apart from the weight builders so the CLI can parse options and print help
without importing torch; torch is imported only when a model is drawn.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from sglang_fastpath.errors import FastpathError

INT4_GROUP_SIZE = 32


class Wiring(str, Enum):
    ORACLE = "oracle"  # the draft provably predicts the target's greedy token
    RANDOM = "random"  # plain random weights (accept length ~1, bf16 near-ties possible)


@dataclass(frozen=True)
class DraftMisses:
    """Where an oracle draft is wrong on purpose, so that verify rejects drafts as it does in real use.

    The target then skips one walk position after some positions (``walk.py``), which the
    draft does not know: a draft token is right exactly when the token before it is no
    skip. ``accept_length`` N puts a skip at every (N+1)-th position, so once generation
    meets the first skip every verify accepts N-1 draft tokens and its bonus token (N at most
    the draft tokens per verify); ``miss_rate`` P makes each position a skip with probability
    P (seeded), so accept lengths vary from request to request and cycle to cycle.
    Neither set: the exact oracle.
    """
    accept_length: int | None = None
    miss_rate: float | None = None

    def __post_init__(self) -> None:
        if self.accept_length is not None and self.miss_rate is not None:
            raise FastpathError("--draft-accept-length and --draft-miss-rate: give one of them, not both")
        if self.accept_length is not None and self.accept_length < 1:
            raise FastpathError(f"--draft-accept-length {self.accept_length}: must be at least 1 "
                                "(1 = every draft token is wrong)")
        if self.miss_rate is not None and not 0.0 < self.miss_rate < 1.0:
            raise FastpathError(f"--draft-miss-rate {self.miss_rate}: must be between 0 and 1, both excluded")

    @property
    def exact(self) -> bool:
        return self.accept_length is None and self.miss_rate is None

    def summary(self) -> dict:
        return {"accept_length": self.accept_length, "miss_rate": self.miss_rate}


class ExpertDtype(str, Enum):
    BF16 = "bf16"
    INT4 = "int4"


@dataclass(frozen=True)
class LlamaShape:
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    max_position: int = 4096
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.layers < 2:
            raise FastpathError(f"--layers {self.layers}: an EAGLE-3 target needs at least 2 layers")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise FastpathError(f"--hidden {self.hidden} / --heads {self.heads} / --kv-heads {self.kv_heads}: "
                                "hidden must be a multiple of heads, and heads of kv-heads")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def summary(self) -> dict:
        return {"layers": self.layers, "hidden": self.hidden, "intermediate": self.intermediate,
                "heads": self.heads, "kv_heads": self.kv_heads, "head_dim": self.head_dim, "vocab": self.vocab}


@dataclass(frozen=True)
class LlamaPairOptions:
    """A Llama target and what its draft needs beyond the target's shape."""
    shape: LlamaShape
    draft_vocab: int
    tokenizer_vocab: int
    draft_intermediate: int | None = None  # default: the target's
    wiring: Wiring = Wiring.ORACLE


def aux_layer_ids(target_layers: int) -> tuple[int, ...]:
    """Which target layers feed the draft (SpecForge's choice, ``[1, L/2 - 1, L - 4]`` for deep targets).

    SGLang captures the input of layer ``id + 1`` (Llama always; DeepSeek when the first
    id is 1), so every id stays below ``L - 1``. The three ids must be distinct: SGLang captures a layer once however often it is listed,
    so a repeated id leaves the draft's ``fc`` with fewer hidden states than it was built for.
    """
    n = target_layers
    if n < 4:
        raise ValueError(f"an EAGLE-3 draft needs a target with at least 4 layers, got {n}")
    if n < 8:
        return (0, (n - 2) // 2, n - 2)
    return (1, n // 2 - 1, n - 4)


@dataclass(frozen=True)
class DraftShape:
    """The one-layer EAGLE-3 draft; ``vocab`` is the target's vocabulary.

    ``max_position`` must not be below the target's: SGLang runs the draft at the
    target's context length and refuses a draft whose own is shorter.
    """
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    target_hidden: int
    aux_layer_ids: tuple[int, ...]
    max_position: int = 4096
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5

    def summary(self, draft_vocab: int) -> dict:
        return {"layers": 1, "hidden": self.hidden, "intermediate": self.intermediate, "heads": self.heads,
                "kv_heads": self.kv_heads, "head_dim": self.head_dim, "vocab": self.vocab,
                "draft_vocab": draft_vocab, "target_hidden": self.target_hidden,
                "aux_layer_ids": list(self.aux_layer_ids)}


@dataclass(frozen=True)
class DeepseekShape:
    """DeepSeek-V3 with Kimi-K2.5's text dimensions by default."""
    layers: int = 4
    hidden: int = 7168
    intermediate: int = 18432  # dense layers
    moe_intermediate: int = 2048
    routed_experts: int = 384
    shared_experts: int = 1
    experts_per_token: int = 8
    first_dense: int = 1
    heads: int = 64
    q_lora_rank: int = 1536
    kv_lora_rank: int = 512
    qk_nope_dim: int = 128
    qk_rope_dim: int = 64
    v_head_dim: int = 128
    vocab: int = 163840
    max_position: int = 262144
    rope_theta: float = 50000.0
    routed_scaling_factor: float = 2.827
    rms_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.layers <= self.first_dense:
            raise FastpathError(f"--layers {self.layers}: need more than {self.first_dense} layer(s) "
                                "so that at least one is MoE")
        if not 1 <= self.experts_per_token <= self.routed_experts:
            raise FastpathError(f"--routed-experts {self.routed_experts}: fewer than the "
                                f"{self.experts_per_token} experts each token uses")
        for what, value in (("hidden", self.hidden), ("moe intermediate", self.moe_intermediate)):
            if value % INT4_GROUP_SIZE:
                raise FastpathError(f"{what} {value} is not a multiple of the INT4 group size {INT4_GROUP_SIZE}")

    @classmethod
    def scaled_down(cls) -> DeepseekShape:
        """Every width shrunk so a DeepSeek-V3-shaped model is built and run in seconds on a CPU (tests)."""
        return cls(layers=4, hidden=256, intermediate=512, moe_intermediate=64, routed_experts=8,
                   experts_per_token=2, heads=4, q_lora_rank=96, kv_lora_rank=64, qk_nope_dim=32,
                   qk_rope_dim=16, v_head_dim=32, vocab=4096, max_position=4096)

    def with_overrides(self, **changes: int | None) -> DeepseekShape:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def is_moe(self, layer: int) -> bool:
        return layer >= self.first_dense

    def summary(self) -> dict:
        return {"layers": self.layers, "hidden": self.hidden, "intermediate": self.intermediate,
                "moe_intermediate": self.moe_intermediate, "routed_experts": self.routed_experts,
                "shared_experts": self.shared_experts, "experts_per_token": self.experts_per_token,
                "first_dense": self.first_dense, "heads": self.heads, "q_lora_rank": self.q_lora_rank,
                "kv_lora_rank": self.kv_lora_rank, "qk_nope_dim": self.qk_nope_dim,
                "qk_rope_dim": self.qk_rope_dim, "v_head_dim": self.v_head_dim, "vocab": self.vocab}

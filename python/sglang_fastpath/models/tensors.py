"""Deterministic tensors: every weight is drawn from its own generator, seeded by (seed, name).

A weight is described before it is made (``TensorSpec``: name, shape, dtype and a
``make`` callable), so a checkpoint can be sized without drawing it and written one
tensor at a time. Index choices that must not depend on the torch build or device
(which tokens are hot, the oracle walk) come from ``StableRng``, built only on
``random.Random.random``, whose sequence Python guarantees across versions.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from collections.abc import Callable

import torch

DTYPE = torch.bfloat16
DTYPE_NAME = "bfloat16"


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    make: Callable[[], torch.Tensor]
    params: int | None = None  # model parameters it holds, when not one per element (packed INT4)
    zeros: bool = False  # every byte is zero: a checkpoint leaves a hole in the file instead of writing it

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * torch.empty((), dtype=self.dtype).element_size()

    @property
    def param_count(self) -> int:
        return math.prod(self.shape) if self.params is None else self.params


def derive_seed(seed: int, name: str) -> int:
    """A 63-bit seed for the tensor ``name`` of a model made from ``seed``."""
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


class TensorFactory:
    """Makes the tensors of one model on ``device``; the same (seed, name) gives the same values."""

    def __init__(self, seed: int, device: str = "cpu") -> None:
        self.seed = seed
        self.device = torch.device(device)

    def generator(self, name: str) -> torch.Generator:
        gen = torch.Generator(device=self.device)
        gen.manual_seed(derive_seed(self.seed, name))
        return gen

    def normal(self, name: str, shape: tuple[int, ...], std: float, dtype: torch.dtype = DTYPE) -> TensorSpec:
        def make() -> torch.Tensor:
            out = torch.randn(shape, generator=self.generator(name), device=self.device, dtype=torch.float32)
            return out.mul_(std).to(dtype)
        return TensorSpec(name, shape, dtype, make)

    def uniform(self, name: str, shape: tuple[int, ...], low: float, high: float,
                dtype: torch.dtype = DTYPE) -> TensorSpec:
        def make() -> torch.Tensor:
            out = torch.rand(shape, generator=self.generator(name), device=self.device, dtype=torch.float32)
            return out.mul_(high - low).add_(low).to(dtype)
        return TensorSpec(name, shape, dtype, make)

    def random_bytes(self, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> TensorSpec:
        """Uniformly random bits, reinterpreted as ``dtype`` (used for packed INT4 words)."""
        size = torch.empty((), dtype=dtype).element_size()

        def make() -> torch.Tensor:
            raw = torch.randint(0, 256, (*shape[:-1], shape[-1] * size), generator=self.generator(name),
                                device=self.device, dtype=torch.uint8)
            return raw.view(dtype)
        return TensorSpec(name, shape, dtype, make)

    def zeros(self, name: str, shape: tuple[int, ...], dtype: torch.dtype = DTYPE) -> TensorSpec:
        """Exact zeros, which ``write_checkpoint`` leaves as a hole in the file (nothing drawn, nothing written)."""
        return TensorSpec(name, shape, dtype, lambda: torch.zeros(shape, dtype=dtype, device=self.device), zeros=True)

    def fill(self, name: str, shape: tuple[int, ...], value: float, dtype: torch.dtype = DTYPE) -> TensorSpec:
        return TensorSpec(name, shape, dtype, lambda: torch.full(shape, value, dtype=dtype, device=self.device))

    def build(self, name: str, shape: tuple[int, ...], make: Callable[[torch.device], torch.Tensor],
              dtype: torch.dtype = DTYPE) -> TensorSpec:
        """A tensor made by ``make(device)`` (structured weights such as the oracle's)."""
        return TensorSpec(name, shape, dtype, lambda: make(self.device).to(dtype))


class StableRng:
    """Index choices that are the same on every machine, torch build and Python 3 version."""

    def __init__(self, seed: int, purpose: str) -> None:
        self._rng = random.Random(derive_seed(seed, purpose))

    def below(self, n: int) -> int:
        return min(int(self._rng.random() * n), n - 1)

    def permutation(self, n: int) -> list[int]:
        items = list(range(n))
        for i in range(n - 1, 0, -1):  # Fisher-Yates
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]
        return items

    def sample(self, population: list[int], k: int) -> list[int]:
        order = self.permutation(len(population))
        return [population[i] for i in order[:k]]

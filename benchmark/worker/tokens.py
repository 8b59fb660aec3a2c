"""Synthetic prompt and draft token ids: deterministic, so every TP rank and variant draws the same."""

from __future__ import annotations

import random

FIRST_TOKEN_ID = 10  # stay clear of special tokens
MAX_TOKEN_ID = 32000  # below every tokenizer's vocabulary the test models use


def token_ids(rows: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    """``rows`` lists of ``length`` ids in [FIRST_TOKEN_ID, min(vocab, MAX_TOKEN_ID))."""
    rng = random.Random(seed)
    high = max(FIRST_TOKEN_ID + 1, min(vocab, MAX_TOKEN_ID))
    return [[rng.randrange(FIRST_TOKEN_ID, high) for _ in range(length)] for _ in range(rows)]

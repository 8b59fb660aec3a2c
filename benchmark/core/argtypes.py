"""Argument types the benchmark scripts share."""

from __future__ import annotations

import argparse


def int_list(text: str) -> tuple[int, ...]:
    """``"1,8,64"`` -> ``(1, 8, 64)``; at least one integer, every one >= 1."""
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: write integers separated by commas, e.g. 1,8,64") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one integer >= 1")
    return values

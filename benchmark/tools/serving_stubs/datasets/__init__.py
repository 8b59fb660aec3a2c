"""A stand-in for Hugging Face ``datasets`` on a host that has none (the offline GPU bundle).

``serving_bench.py`` puts ``benchmark/tools/serving_stubs`` first on the benchmark client's
``PYTHONPATH`` (never the server's) when ``import datasets`` fails there: SGLang 0.5.17's
``sglang/benchmark/datasets/__init__.py`` imports every dataset module, and ``mmmu.py`` does
``from datasets import load_dataset`` at module level (``longbench_v2.py`` inside a function), so
the client dies at import although the random and random-ids datasets never load one. Importing
this package succeeds; calling ``load_dataset`` says why it cannot work here.
"""

from __future__ import annotations

from typing import NoReturn

MESSAGE = ("the Hugging Face 'datasets' package is not installed on this host (serving_bench put a stub "
           "in its place); only the random and random-ids datasets run here")


def load_dataset(*args: object, **kwargs: object) -> NoReturn:
    """Always raises: no dataset can be loaded without the real package."""
    raise RuntimeError(MESSAGE)

"""Patch 0044's ``sglang.kernels.ops.attention.verify_mla_ws`` (the warp-specialized Gluon verify attention), read
out of the committed patches (``patches/``), so that the tools here (``bench.py``, ``xcompile.py``) and the tests time,
compile and check the code the fork ships, with or without an installed SGLang. Importing this module gives that
module itself (``sys.modules`` is pointed at it), so ``monkeypatch.setattr(kernel, ...)`` reaches its functions.

Its SGLang imports (0007's merge kernel and shared-memory query) are made inside the functions that need them, from
the installed fork."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

from benchmark.tools.attn_verify_bench import ROOT, file_from_series

WS_FILE = "python/sglang/kernels/ops/attention/verify_mla_ws.py"


def _load(patch_dir: Path = ROOT / "patches"):
    file = Path(tempfile.mkdtemp(prefix="verify-mla-ws-")) / Path(WS_FILE).name
    file.write_text(file_from_series(WS_FILE, patch_dir))
    spec = importlib.util.spec_from_file_location(__name__, file)
    module = importlib.util.module_from_spec(spec)
    module.WS_FILE = WS_FILE
    sys.modules[__name__] = module
    spec.loader.exec_module(module)
    return module


_load()

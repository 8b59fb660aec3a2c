"""Patch 0044's ``sglang.kernels.ops.attention.verify_mla_ws`` (the warp-specialized Gluon verify attention), read
out of the committed patches (``patches/``), so that the tools here (``bench.py``, ``xcompile.py``) and the tests time,
compile and check the code the fork ships, with or without an installed SGLang. Importing this module gives that
module itself (``sys.modules`` is pointed at it), so ``monkeypatch.setattr(kernel, ...)`` reaches its functions.

Its SGLang imports (0007's merge kernel and shared-memory query) are made inside the functions that need them, from
the installed fork."""

from __future__ import annotations

from benchmark.tools.attn_verify_bench import module_from_series

WS_FILE = "python/sglang/kernels/ops/attention/verify_mla_ws.py"

module_from_series(WS_FILE, __name__)

"""The old script paths as thin shims: ``python benchmark/NAME.py ARGS`` and ``python -m benchmark.NAME ARGS``.

Each ``benchmark/NAME.py`` beside this file only hands ``run_module`` the module that now holds
the program (``benchmark.driver.run``, ``benchmark.tools.cycle_phases``, ...). Run as a script,
Python puts ``benchmark/`` itself, not the repository root, first on ``sys.path``, so the package
cannot be imported from there. Rather than edit ``sys.path``, ``run_module`` replaces the process
with ``python -P -m MODULE ARGS`` whose PYTHONPATH starts with the repository root and ``python/``
(``sglang_fastpath``): the two folders the old scripts put first on their path. ``-P`` keeps the
current directory off the path, so the same modules are found from any directory.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

REPO = Path(__file__).resolve().parents[1]


def run_module(module: str) -> NoReturn:
    """Replace this process by ``python -P -m module`` with this process's arguments."""
    path = os.pathsep.join(filter(None, [str(REPO), str(REPO / "python"), os.environ.get("PYTHONPATH")]))
    os.execve(sys.executable, [sys.executable, "-P", "-m", module, *sys.argv[1:]], {**os.environ, "PYTHONPATH": path})

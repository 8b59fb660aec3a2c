"""``python -m sglang_fastpath.lock ARGS``: ``sglang-fastpath lock ARGS`` for a bare environment.

A program name only: the lock itself is ``install/lock.py``. Imports the ``lock`` verb alone.
"""

from sglang_fastpath.commands import lock as verb
from sglang_fastpath.commands import run_alone

if __name__ == "__main__":
    raise SystemExit(run_alone(verb, "python -m sglang_fastpath.lock", "lock", None))

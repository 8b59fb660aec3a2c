"""``python -m sglang_fastpath.install ARGS``: ``sglang-fastpath install ARGS`` for a bare environment.

Run by ``docker/install.sh``, ``demo.sh --bundle`` and the bundle's ``install.sh``; imports the
``install`` verb alone, none of the CLI's other verbs.
"""

from sglang_fastpath.commands import install as verb
from sglang_fastpath.commands import run_alone

raise SystemExit(run_alone(verb, "python -m sglang_fastpath.install", "install", None))

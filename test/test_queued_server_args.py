"""The device scripts queued in test/gpu/queue/ name only server arguments SGLang 0.5.17 has.

Session 27's first device call died at once on ``"cuda_graph_max_bs"``, a ServerArgs field of other
releases (0.5.17 has ``cuda_graph_max_bs_decode``): 240 s of a 1800-s device budget for a typo a CPU can
see. Every ``"name":`` key of a ``--server-args`` JSON and every ``--flag`` after ``--`` of a
``serving_bench`` line must be a field (or its flag spelling) of the pinned release's ``ServerArgs``,
read from the pristine tree's ``server_args.py`` by its syntax tree.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from sglang_trees import find_def, trees  # noqa: F401 - trees is a fixture

QUEUE = Path(__file__).resolve().parent / "gpu" / "queue"
LIBRARY = QUEUE.parent / "device_bench.sh"  # what every queued script sources (shared server-args variables)
JSON_KEY = re.compile(r'\\?"([a-z_][a-z0-9_]*)\\?"\s*:')
SERVER_ARGS_JSON = re.compile(r"--server-args\s+(?:'([^']*)'|\"\$(\w+)\")")
SHELL_VAR = re.compile(r"^(\w+)=\"(.*)\"$", re.M)


def server_args_fields(tree: Path) -> set[str]:
    """The annotated fields of ``class ServerArgs`` in ``tree``."""
    cls = find_def(tree, "sglang.srt.server_args", "ServerArgs")
    return {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def named_server_args(script: str, library: str = "") -> set[str]:
    """Server-argument names a queued script passes: JSON keys of --server-args (inline, or through a shell
    variable set in the script or in the ``library`` it sources), JSON keys of every variable the script itself
    sets (a script may pick its --server-args among them, e.g. ``ARGS=$CAP`` in a loop, or build them from
    fragments) and the flags after ``--`` of a serving_bench command (as field names)."""
    own = dict(SHELL_VAR.findall(script))
    variables = {**dict(SHELL_VAR.findall(library)), **own}
    names: set[str] = set()
    for inline, var in SERVER_ARGS_JSON.findall(script):
        names |= set(JSON_KEY.findall(inline or variables.get(var, "")))
    for value in own.values():
        names |= set(JSON_KEY.findall(value))
    for line in re.sub(r"\\\n\s*", " ", script).splitlines():
        if "serving_bench" in line and " -- " in line:
            tail = line.split(" -- ", 1)[1]
            names |= {flag[2:].replace("-", "_") for flag in re.findall(r"--[a-z][a-z0-9-]*", tail.split(">")[0])}
    return names


def test_the_reader_finds_json_keys_and_serving_flags() -> None:
    script = ('CAP="{\\"mem_fraction_static\\": 0.65, \\"cuda_graph_max_bs\\": 32}"\n'
              '$B --models m --server-args "$CAP" --name x\n'
              "$B --server-args '{\"page_size\": 64}'\n"
              "python3 -m benchmark.tools.serving_bench --models m -- \\\n  --mem-fraction-static 0.65 > log\n")
    assert named_server_args(script) == {"mem_fraction_static", "cuda_graph_max_bs", "page_size"}
    sourced = '$B --server-args "$S0" --name y\n'
    assert named_server_args(sourced) == set()
    assert named_server_args(sourced, library='S0="{\\"page_size\\": 64}"\n') == {"page_size"}
    picked = ('CAP="\\"mem_fraction_static\\": 0.65"\n'
              'for run in a b; do\n  ARGS="{$CAP}"; [ $run = b ] && ARGS=$CAP\n'
              '  $B --server-args "$ARGS" --name $run\ndone\n')
    assert named_server_args(picked) == {"mem_fraction_static"}


def test_every_queued_script_names_only_fields_of_the_pinned_release(trees) -> None:  # noqa: F811
    fields = server_args_fields(trees.pristine)
    assert {"cuda_graph_max_bs_decode", "mem_fraction_static"} <= fields and "cuda_graph_max_bs" not in fields
    scripts = sorted(QUEUE.glob("*.sh"))
    if not scripts:
        pytest.skip("no device script is queued")
    library = LIBRARY.read_text()
    unknown = {p.name: sorted(named_server_args(p.read_text(), library) - fields) for p in scripts}
    assert {name: bad for name, bad in unknown.items() if bad} == {}

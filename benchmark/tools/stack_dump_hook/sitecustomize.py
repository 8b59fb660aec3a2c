"""Put first on ``PYTHONPATH`` by ``benchmark.tools.stall_watch.with_stack_dumps``: every Python process started
with ``FASTPATH_STACK_DUMP_DIR`` in its environment (a server, its scheduler and detokenizer children, a benchmark
client) writes the stacks of all its threads to its stderr on SIGUSR2 (``faulthandler``) and keeps running, and
leaves an empty file named by its pid in that folder, so that only processes with the handler are signalled.
Then the next ``sitecustomize`` on the path, if any, runs as it would have without this one."""

import os

_marker_dir = os.environ.get("FASTPATH_STACK_DUMP_DIR")
if _marker_dir and os.path.isdir(_marker_dir):
    import faulthandler
    import signal

    faulthandler.register(signal.SIGUSR2, all_threads=True, chain=False)
    open(os.path.join(_marker_dir, str(os.getpid())), "w").close()


def _run_the_next_sitecustomize() -> None:
    import importlib.machinery
    import importlib.util
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_run_the_next_sitecustomize()

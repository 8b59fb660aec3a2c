"""One variant's process (``python -m benchmark.worker --spec JOB.spec.json --out JOB.jsonl`` runs ``main``).

The orchestrator puts the variant's site on PYTHONPATH (after ``python/``, which holds no SGLang); this checks that SGLang
really came from there (a stray install would silently benchmark the wrong code),
writes the versions it found, then runs the job's micro or e2e measurement, or a GPU-gate engine case. Every
record and error goes to ``--out`` as it happens. Exit status: 0 the job ran (single
points may still have failed: see the error lines), 1 it did not.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from benchmark.core.spec import JobSpec
from benchmark.worker.sink import Sink


def versions() -> dict[str, Any]:
    """Versions of what this process imported (the GPUs come from nvidia-smi in the orchestrator)."""
    import sglang
    import torch

    found: dict[str, Any] = {"python": sys.version.split()[0], "sglang": getattr(sglang, "__version__", None),
                             "sglang_file": sglang.__file__, "torch": torch.__version__,
                             "cuda": torch.version.cuda, "pid": os.getpid()}
    try:
        import triton

        found["triton"] = triton.__version__
    except ImportError:
        found["triton"] = None
    return found  # no CUDA call here: SGLang sets CUDA_* variables before it initialises CUDA


def check_site(site: str, sglang_file: str) -> None:
    if not Path(os.path.abspath(sglang_file)).is_relative_to(os.path.abspath(site)):  # symlinks as given
        raise RuntimeError(f"sglang was imported from {sglang_file}, not from the variant's site {site}; "
                           "check the site folder holds sglang/ and nothing earlier on sys.path shadows it")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmark.worker")
    parser.add_argument("--spec", required=True, type=Path)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    raw = json.loads(args.spec.read_text())
    sink = Sink(args.out)
    code = 1
    try:
        spec = JobSpec.from_spec(raw)
        found = versions()
        sink.info("versions", found)
        if spec.site:  # a gate case runs whatever SGLang comes first on PYTHONPATH
            check_site(spec.site, found["sglang_file"])
        if spec.kind == "micro":
            from benchmark.worker import micro

            code = micro.run_job(spec, sink, args.out)
        elif spec.kind == "e2e":
            from benchmark.worker import e2e

            code = e2e.run_job(spec, sink, args.out)
        elif spec.kind == "case":
            from benchmark.worker import engine_case

            code = engine_case.run_job(spec, sink)
        else:
            raise ValueError(f"job kind {spec.kind!r} is not micro, e2e or case")
    except BaseException as exc:  # noqa: BLE001 - recorded; the exit status says it failed
        sink.error(f"{raw.get('kind')} job", exc)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # engine and NCCL threads must not keep a finished job alive


"""The files a run leaves beside its results.json: the folder, command.txt and env.json.

``results/<date>-<gpu>-<name>/`` holds results.json (all records), command.txt (the
exact command, its working directory, and every process it started with the
environment variables it changed), env.json (host, GPUs, git state, filtered
environment, each variant's site and the versions its processes reported), raw/
(each job's spec and JSON lines), logs/ and the PNG plots. command.txt and env.json
show no absolute path of the machine (``portable``: the repository is ``.``, the
interpreter ``python3``), since results folders are committed.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Mapping

from benchmark.driver.envinfo import env_snapshot, git_state, gpu_slug, host_info, site_version
from benchmark.driver.orchestrate import JobOutcome
from benchmark.driver.plan import Variant
from benchmark.driver.portable import here, portable, portable_env


def results_dir(root: Path, gpus: list[dict[str, str]], name: str, now: float | None = None) -> Path:
    """A new folder ``root/<YYYYMMDD-HHMM>-<gpu>-<name>`` (``-2``, ``-3``... if taken)."""
    stamp = time.strftime("%Y%m%d-%H%M", time.localtime(now))
    base = root / f"{stamp}-{gpu_slug(gpus)}-{name}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    path.mkdir(parents=True)
    return path


def command_text(argv: list[str], cwd: str, outcomes: list[JobOutcome], repo: Path) -> str:
    """command.txt: ``cwd`` and ``argv`` as invoked, then each started process's environment
    changes and command, with ``repo`` shown as ``.`` and the interpreter as ``python3``."""
    lines = ["# benchmark/run.py as invoked", f"cd {shlex.quote(cwd)}",
             shlex.join([sys.executable, *argv]), "",
             "# the processes it started: environment changes, then the command (run in a scratch folder)"]
    for o in outcomes:
        if not o.command:
            lines.append(f"# {o.job.name}: not started ({o.note})")
            continue
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(o.env.items()))
        lines.append(f"# {o.job.name}: {o.status} in {o.seconds:.0f} s")
        lines.append(f"env {env} {shlex.join(o.command)}")
    return portable("\n".join(lines) + "\n", **here(repo))


def env_record(variants: list[Variant], gpus: list[dict[str, str]], repo: Path, outcomes: list[JobOutcome],
               environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """env.json: host, GPUs, git state, the kept environment and each variant's site and
    reported versions; paths under ``repo`` and the interpreter's made ``portable``."""
    paths = here(repo)
    reported: dict[str, list[Any]] = {}
    for o in outcomes:
        for line in o.lines:
            if line.get("type") == "info" and line.get("what") == "versions":
                reported.setdefault(o.job.variant.name, []).append(line.get("data"))
    return {
        "host": {k: portable(v, **paths) if isinstance(v, str) else v for k, v in host_info().items()},
        "gpus": gpus,
        "git": git_state(repo),
        "environment": portable_env(env_snapshot(os.environ if environ is None else environ), **paths),
        "variants": {v.name: {"site": v.site, "env": dict(v.env), "sglang_version": site_version(v.site),
                              "reported": reported.get(v.name, [])[:1]} for v in variants},
    }


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")

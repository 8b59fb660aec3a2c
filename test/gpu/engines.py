"""Launch engine cases (cached per session) through the benchmark worker, and the kwargs they share.

Each case is a job of kind ``case`` for ``python -m benchmark.worker`` (``benchmark/worker/engine_case.py``),
in its own process: SGLang spawns subprocesses, and each case must start from a clean CUDA context.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sglang_fastpath.models.folder import ModelsFolder

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PROMPTS = [
    "Hello, my name is",
    "The capital of France is Paris, and",
    "def fibonacci(n):",
    "import numpy as np\nx = np.zeros(",
]
SAMPLING = {"temperature": 0.0, "max_new_tokens": 64, "ignore_eos": True}
SPEC = {"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
# Several engines share the GPUs when gate.sh runs its shards at once. SGLang leaves
# (1 - mem_fraction_static) of the memory free at its own start as slack and fills the
# rest with KV cache unless max_total_tokens caps it: the cap keeps each engine at a few
# GiB, the fraction keeps the slack small enough for engines that start later.
MEM_FRACTION = 0.6
MAX_TOTAL_TOKENS = 16384


@dataclass(frozen=True)
class Case:
    models: Path
    spec: bool
    cuda_graph: bool = True
    tp: int = 1
    extra: tuple[tuple[str, object], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    prompts: tuple[str, ...] = tuple(PROMPTS)
    sampling: tuple[tuple[str, object], ...] = tuple(SAMPLING.items())

    def engine_kwargs(self) -> dict:
        kw = dict(
            model_path=str(ModelsFolder(self.models).target), dtype="bfloat16", attention_backend="triton",
            sampling_backend="pytorch", grammar_backend="none", mem_fraction_static=MEM_FRACTION,
            max_total_tokens=MAX_TOTAL_TOKENS, context_length=1024, max_running_requests=8,
            cuda_graph_max_bs_decode=8,
            disable_cuda_graph=not self.cuda_graph, tp_size=self.tp, random_seed=0, log_level="info",
        )
        if self.spec:
            kw.update(speculative_algorithm="EAGLE3", speculative_draft_model_path=str(ModelsFolder(self.models).draft), **SPEC)
        kw.update(dict(self.extra))
        return kw


_CACHE: dict[str, dict] = {}


def case_points(case: Case) -> dict:
    """What the engine runs: ``CasePoints`` of ``benchmark/core/spec.py``, as JSON."""
    return {"engine": case.engine_kwargs(), "prompts": list(case.prompts), "sampling": dict(case.sampling)}


def case_spec(case: Case, key: str, points: dict | None = None) -> dict:
    """The benchmark worker's job spec (kind ``case``, ``benchmark/core/spec.py``) for ``case``."""
    return {"kind": "case", "models": str(case.models), "tp": case.tp, "job": f"gate-case-{key}",
            "site": os.environ.get("SGLANG_FASTPATH_SITE_FORK", ""), "case": points or case_points(case)}


def read_case(out_path: Path) -> dict | None:
    """The ``case`` record of a worker's JSON lines, with the errors it logged when there is none."""
    if not out_path.is_file():
        return None
    lines = [json.loads(line) for line in out_path.read_text().splitlines() if line.strip()]
    for line in lines:
        if line.get("type") == "info" and line.get("what") == "case":
            return {k: v for k, v in line["data"].items() if k != "what"}
    errors = [f"{line.get('where')}: {line.get('traceback') or line.get('error')}" for line in lines
              if line.get("type") == "error"]
    return {"ok": False, "error": "\n".join(errors) or "the worker wrote no case record"}


def run_case(case: Case, workdir: Path, timeout_s: float = 420) -> dict:
    """The record of ``case`` (run once per session, by ``python -m benchmark.worker``); raises with
    the engine's error."""
    points = case_points(case)
    key_data = {**points, "env": dict(case.env)}
    key = hashlib.sha256(json.dumps(key_data, sort_keys=True).encode()).hexdigest()[:16]
    if key in _CACHE:
        return _CACHE[key]
    workdir.mkdir(parents=True, exist_ok=True)
    case_path, out_path, log_path = (workdir / f"{key}.{ext}" for ext in ("case.json", "out.jsonl", "log"))
    case_path.write_text(json.dumps(case_spec(case, key, points), indent=1))
    out_path.unlink(missing_ok=True)
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p] + [str(REPO / "python"), str(REPO)]
    env = dict(os.environ, **dict(case.env), PYTHONPATH=os.pathsep.join(path))
    with open(log_path, "w") as log:
        subprocess.run([sys.executable, "-m", "benchmark.worker", "--spec", str(case_path), "--out", str(out_path)],
                       stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout_s, cwd=REPO)
    record = read_case(out_path)
    if record is None:
        raise RuntimeError(f"engine case wrote no result; log: {log_path}\n{log_path.read_text()[-3000:]}")
    record = {"case": key_data, "log": log_path.name, **record}  # {key}.out.json: what summarize_engines.py reads
    (workdir / f"{key}.out.json").write_text(json.dumps(record, indent=1, default=str))
    if not record["ok"]:
        raise RuntimeError(f"engine case failed ({log_path}):\n{record.get('error')}")
    _CACHE[key] = record
    return record


def output_ids(record: dict) -> list[list[int]]:
    return [o["output_ids"] for o in record["outputs"]]


def gpu_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0

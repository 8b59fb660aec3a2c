"""Launch engine cases in subprocesses (cached per session) and the kwargs they share."""

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


def run_case(case: Case, workdir: Path, timeout_s: float = 420) -> dict:
    """The JSON record of ``case`` (run once per session); raises with the engine's error."""
    spec = {"engine": case.engine_kwargs(), "prompts": list(case.prompts), "sampling": dict(case.sampling),
            "env": dict(case.env)}
    key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    if key in _CACHE:
        return _CACHE[key]
    workdir.mkdir(parents=True, exist_ok=True)
    case_path, out_path, log_path = (workdir / f"{key}.{ext}" for ext in ("case.json", "out.json", "log"))
    case_path.write_text(json.dumps(spec, indent=1))
    env = dict(os.environ, **dict(case.env))
    with open(log_path, "w") as log:
        subprocess.run([sys.executable, str(HERE / "engine_case.py"), str(case_path), str(out_path)],
                       stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout_s)
    if not out_path.is_file():
        raise RuntimeError(f"engine case wrote no result; log: {log_path}\n{log_path.read_text()[-3000:]}")
    record = json.loads(out_path.read_text())
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

"""A GPU-gate engine case (job kind ``case``): one ``sglang.Engine``, one ``generate``, the outputs.

``test/gpu/engines.py`` writes the job spec (``CasePoints``: Engine keyword arguments, prompts,
sampling) and reads back one ``info`` line ``case`` from the worker's JSON lines: ``ok``, the
outputs (text, output ids, the ``spec_*`` and token-count meta info), ``/server_info``'s internal
states, start-up and generate seconds, and on failure the traceback's tail as ``error``.
"""

from __future__ import annotations

import time
import traceback
from typing import Any

from benchmark.core.spec import JobSpec
from benchmark.worker.sink import Sink

META_KEYS = ("completion_tokens", "prompt_tokens")


def outputs_of(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a case keeps of each ``Engine.generate`` output."""
    return [{"text": o.get("text"), "output_ids": o.get("output_ids"),
             "meta_info": {k: v for k, v in o.get("meta_info", {}).items() if k.startswith("spec_") or k in META_KEYS}}
            for o in raw]


def run_job(spec: JobSpec, sink: Sink) -> int:
    case = spec.case
    if case is None:
        raise ValueError("a case job needs its 'case' points (engine, prompts, sampling)")
    record: dict[str, Any] = {"ok": False}
    engine = None
    try:
        import sglang

        start = time.time()
        engine = sglang.Engine(**dict(case.engine))
        record["startup_s"] = round(time.time() - start, 1)
        start = time.time()
        outputs = engine.generate(list(case.prompts), dict(case.sampling))
        record["generate_s"] = round(time.time() - start, 3)
        record["outputs"] = outputs_of(outputs)
        record["internal_states"] = engine.get_server_info().get("internal_states", [])
        record["ok"] = True
    except Exception as exc:  # noqa: BLE001 - the test reads the traceback from the record
        record["error"] = "".join(traceback.format_exception(exc))[-6000:]
    finally:
        sink.info("case", record)
        if engine is not None:
            try:
                engine.shutdown()
            except Exception:  # noqa: BLE001
                pass
    return 0 if record["ok"] else 1

"""Run one offline ``sglang.Engine`` case and write its greedy outputs as JSON.

Usage: python engine_case.py CASE.json OUT.json. CASE holds ``engine`` (Engine
keyword arguments), ``prompts`` and ``sampling``. Run as its own process: SGLang
spawns subprocesses, and each case must start from a clean CUDA context.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback


def main(case_path: str, out_path: str) -> None:
    case = json.load(open(case_path))
    record: dict = {"case": case, "ok": False}
    engine = None
    try:
        import sglang as sgl

        start = time.time()
        engine = sgl.Engine(**case["engine"])
        record["startup_s"] = round(time.time() - start, 1)
        start = time.time()
        outputs = engine.generate(case["prompts"], case["sampling"])
        record["generate_s"] = round(time.time() - start, 3)
        record["outputs"] = [
            {"text": o["text"], "output_ids": o.get("output_ids"), "meta_info": {
                k: v for k, v in o.get("meta_info", {}).items()
                if k.startswith("spec_") or k in ("completion_tokens", "prompt_tokens")}}
            for o in outputs
        ]
        info = engine.get_server_info()
        record["internal_states"] = info.get("internal_states", [])
        record["ok"] = True
    except Exception as exc:  # noqa: BLE001 - the test reads the traceback from the JSON
        record["error"] = "".join(traceback.format_exception(exc))[-6000:]
    finally:
        with open(out_path, "w") as f:
            json.dump(record, f, indent=1, default=str)
        if engine is not None:
            try:
                engine.shutdown()
            except Exception:  # noqa: BLE001
                pass
    sys.stdout.flush()
    os._exit(0 if record["ok"] else 1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

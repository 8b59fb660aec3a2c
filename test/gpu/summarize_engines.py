"""Summarize the per-engine records that ``engines.run_case`` wrote into one JSON and a table.

Usage: python test/gpu/summarize_engines.py ENGINE_DIR... --out summary.json
For each case: model, TP, speculation, graphs, accept lengths, whether the greedy
ids equal the same model's no-speculation run, and the all-reduce telemetry.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def load_cases(dirs: list[Path]) -> list[dict]:
    cases = []
    for folder in dirs:
        for path in sorted(folder.glob("*.out.json")):
            record = json.loads(path.read_text())
            engine = record["case"]["engine"]
            states = record.get("internal_states") or [{}]
            cases.append({
                "result": path.name,
                "model": Path(engine["model_path"]).parent.name,
                "tp": engine["tp_size"],
                "speculation": engine.get("speculative_algorithm"),
                "cuda_graph": not engine["disable_cuda_graph"],
                "decode_graph_disabled": bool(engine.get("disable_decode_cuda_graph")),
                "cuda_graph_max_bs_decode": engine.get("cuda_graph_max_bs_decode"),
                "custom_all_reduce_disabled": bool(engine.get("disable_custom_all_reduce")),
                "env": record["case"].get("env"),
                "ok": record["ok"],
                "startup_s": record.get("startup_s"),
                "accept_length": [o["meta_info"].get("spec_accept_length") for o in record.get("outputs", [])],
                "output_ids": [o["output_ids"] for o in record.get("outputs", [])],
                "all_reduce_stats": states[0].get("all_reduce_stats"),
                "error": (record.get("error") or "")[-500:] or None,
            })
    return cases


def mark_parity(cases: list[dict]) -> list[dict]:
    """Add ``greedy_equals_no_spec`` (None without a baseline) and drop the token ids."""
    for case in cases:
        base = [c for c in cases if c["model"] == case["model"] and c["tp"] == case["tp"]
                and c["speculation"] is None and c["ok"]]
        case["greedy_equals_no_spec"] = (case["output_ids"] == base[0]["output_ids"]) if base else None
    for case in cases:
        del case["output_ids"]
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    cases = mark_parity(load_cases(args.dirs))
    args.out.write_text(json.dumps({"cases": cases}, indent=1) + "\n")
    for c in cases:
        graphed = c["cuda_graph"] and not c["decode_graph_disabled"]
        graph = f"graph<=bs{c['cuda_graph_max_bs_decode']}" if graphed else "eager"
        print(f"{c['model']:>8} tp{c['tp']} {c['speculation'] or 'no-spec':>7} {graph:>11} ok={c['ok']} "
              f"accept={c['accept_length']} parity={c['greedy_equals_no_spec']}")


if __name__ == "__main__":
    main()

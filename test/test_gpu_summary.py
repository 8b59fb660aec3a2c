"""The GPU gate's summarizer on synthetic engine records (CPU)."""

from __future__ import annotations

import json
from pathlib import Path

from summarize_engines import load_cases, mark_parity


def _record(folder: Path, name: str, model: str, spec: str | None, ids: list[list[int]], tp: int = 1) -> None:
    engine = {"model_path": f"/m/{model}/target", "tp_size": tp, "disable_cuda_graph": False}
    if spec:
        engine["speculative_algorithm"] = spec
    outputs = [{"output_ids": i, "meta_info": {"spec_accept_length": 4.0 if spec else None}} for i in ids]
    (folder / f"{name}.out.json").write_text(json.dumps({"case": {"engine": engine, "env": {}}, "ok": True,
                                                         "outputs": outputs}))


def test_parity_is_judged_against_the_same_model_and_tp(tmp_path: Path) -> None:
    _record(tmp_path, "a", "tiny", None, [[1, 2], [3, 4]])
    _record(tmp_path, "b", "tiny", "EAGLE3", [[1, 2], [3, 4]])
    _record(tmp_path, "c", "tiny", "EAGLE3", [[1, 2], [3, 5]])
    _record(tmp_path, "d", "tiny", "EAGLE3", [[1, 2], [3, 4]], tp=2)  # no TP2 baseline
    cases = {c["result"]: c for c in mark_parity(load_cases([tmp_path]))}
    assert cases["b.out.json"]["greedy_equals_no_spec"] is True
    assert cases["c.out.json"]["greedy_equals_no_spec"] is False
    assert cases["d.out.json"]["greedy_equals_no_spec"] is None
    assert cases["b.out.json"]["accept_length"] == [4.0, 4.0] and "output_ids" not in cases["b.out.json"]

"""benchmark/results/: the generated INDEX.md is up to date, its rows say what the runs measured, and
the committed run folders keep raw data and logs compressed."""

from __future__ import annotations

import json
from pathlib import Path

from benchmark.driver import results_index
from benchmark.driver.schema import Record, ResultSet


def test_the_committed_index_is_what_the_generator_writes() -> None:
    committed = (results_index.RESULTS / results_index.INDEX).read_text()
    assert committed == results_index.render(), "stale: run python -m benchmark.results_index and commit INDEX.md"


def test_no_run_folder_holds_plain_raw_data_or_logs() -> None:
    plain = sorted(str(p.relative_to(results_index.RESULTS)) for p in results_index.RESULTS.rglob("*")
                   if (p.is_dir() and p.name in ("raw", "logs")) or p.suffix == ".jsonl")
    assert plain == [], "keep raw/ and logs/ as raw.tar.gz and logs.tar.gz (benchmark/README.md)"


def _e2e(variant: str, mode: str, bs: int, value: float, config: str = "tp2") -> Record:
    return Record(variant, config, "triton", mode, bs, 4 if mode == "e2e_spec" else 0, 1 if mode == "e2e_spec" else 0,
                  "tokens_per_s", value)


def _run(root: Path, name: str, heading: str, records: list[Record], errors: int = 0) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "README.md").write_text(f"Some text first.\n\n# {heading}\n\n## More\n")
    ResultSet({"name": name}, records, errors=[{"job": "j", "error": "boom"}] * errors).save(folder / "results.json")


def _results(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    _run(root, "20260102-0304-h200x2-stock-vs-fork", "Stock | fork", [
        _e2e("stock", "e2e_nospec", 1, 100.0), _e2e("fork", "e2e_nospec", 1, 110.0),
        _e2e("stock", "e2e_spec", 1, 200.0), _e2e("fork", "e2e_spec", 1, 300.0),
    ], errors=2)
    _run(root, "20260101-0000-h200-one-variant", "Speculation on and off", [
        _e2e("fork", "e2e_nospec", 8, 50.0, "tp1"), _e2e("fork", "e2e_spec", 8, 100.0, "tp1"),
    ])
    gate = root / "gate" / "20260103-0000-h200x2-gpu-gate"
    gate.mkdir(parents=True)
    (gate / "summary.json").write_text(json.dumps({"cases": [
        {"ok": True, "greedy_equals_no_spec": True}, {"ok": False, "greedy_equals_no_spec": None},
        {"ok": True, "greedy_equals_no_spec": False}]}))
    (root / "notes").mkdir()  # not a run folder: no date in its name
    return root


def test_rows_give_date_gpu_heading_variants_and_ratios(tmp_path: Path) -> None:
    text = results_index.render(_results(tmp_path))
    rows = [line for line in text.splitlines() if line.startswith("| 2026")]
    assert rows == [
        "| 2026-01-01 00:00 | h200 | [one-variant](20260101-0000-h200-one-variant/) | Speculation on and off | fork "
        "| EAGLE-3 / no spec tp1 bs 8: 2.00x tok/s |",
        "| 2026-01-02 03:04 | h200x2 | [stock-vs-fork](20260102-0304-h200x2-stock-vs-fork/) | Stock \\| fork "
        "| stock vs fork | fork/stock e2e_spec tp2 bs 1: 1.50x tok/s; fork/stock e2e_nospec tp2 bs 1: 1.10x tok/s; 2 errors |",
        "| 2026-01-03 00:00 | h200x2 | [gpu-gate](gate/20260103-0000-h200x2-gpu-gate/) | - | - "
        "| 2/3 engine cases ok; greedy = no spec in 1/2 |",
    ]
    assert "notes" not in text
    assert text.index("## GPU gate runs") < text.index("gate/20260103")


def test_check_fails_on_a_stale_index_and_passes_once_written(tmp_path: Path) -> None:
    root = _results(tmp_path)
    assert results_index.main(["--root", str(root), "--check"]) == 1  # no INDEX.md yet
    assert results_index.main(["--root", str(root)]) == 0
    assert results_index.main(["--root", str(root), "--check"]) == 0
    readme = root / "20260101-0000-h200-one-variant" / "README.md"
    readme.write_text("# A new heading\n")
    assert results_index.main(["--root", str(root), "--check"]) == 1

"""benchmark/tools/serving_bench.py on CPU: the benchmark command, reading its JSONL, the table."""

from __future__ import annotations

import json
from pathlib import Path

from benchmark.tools.serving_bench import Point, bench_command, parse_args, prompts_for, read_point, table


def test_command_is_offline_and_fixed_length() -> None:
    cmd = bench_command(30001, "/m/target", 8, 128, 256, 1, Path("/o/x.jsonl"))
    joined = " ".join(cmd)
    assert "-m sglang.benchmark.serving" in joined and "--dataset-name random-ids" in joined
    assert "--random-range-ratio 1" in joined and "--max-concurrency 8" in joined and "--num-prompts 32" in joined
    assert "--seed 1" in joined and "--port 30001" in joined and "--host 127.0.0.1" in joined
    assert prompts_for(1) == 16 and prompts_for(32) == 128


def test_reads_the_last_result_line(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    rows = [{"completed": 16, "output_throughput": 100.0}, {"completed": 32, "output_throughput": 812.5,
            "request_throughput": 3.2, "median_ttft_ms": 20.0, "p99_ttft_ms": 40.0, "median_itl_ms": 4.0,
            "p99_itl_ms": 9.0, "accept_length": 2.98}]  # fmt: skip
    out.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    point = read_point("eagle3", 8, out)
    assert (point.prompts, point.output_tokens_per_s, point.accept_length, point.error) == (32, 812.5, 2.98, None)
    assert read_point("eagle3", 8, tmp_path / "missing.jsonl").error == "no result line"


def test_table_pairs_modes_by_concurrency() -> None:
    def pt(mode: str, c: int, tps: float, acc: float | None) -> Point:
        return Point(mode, c, 16, tps, 1.0, 10.0, 20.0, 5.0, 9.0, acc)

    text = table([pt("nospec", 1, 300.0, None), pt("eagle3", 1, 450.0, 3.0), pt("nospec", 8, 2000.0, None)])
    assert "| 1 | 300.0 | 450.0 | 1.50 | 3.0 |" in text
    assert "| 8 | 2000.0 | - | - | - |" in text


def test_extra_server_args_after_dashes() -> None:
    args = parse_args(["--models", "m", "--out", "o", "--", "--mem-fraction-static", "0.65"])
    assert args.server_args == ["--mem-fraction-static", "0.65"] and args.concurrency == [1, 8, 32]

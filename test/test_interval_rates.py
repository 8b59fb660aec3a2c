"""``benchmark.tools.interval_rates``: a server log's decode intervals grouped into phases, and which ones swing.

Phases split at each engine's start (``server_args=``), at a change of ``#running-req`` and where ``#token`` falls
(the next batch); each phase drops its first interval (the batch's prefill). A phase swings when its lowest tenth
is below 0.85 of its highest; ``of engine 0`` compares it with the log's first engine (plain decode in a benchmark
log). Session 42's disturbed held run (intervals 341-504 tok/s against plain decode's steady 521-529) is the shape.
"""

from __future__ import annotations

import json

from benchmark.tools import interval_rates


def _decode(running: int, tokens: int, rate: float, off: bool = False) -> str:
    off_part = "speculation off, " if off else ""
    return (f"[2026-12-05 18:24:31] Decode batch, #running-req: {running}, #token: {tokens}, token usage: 0.00, "
            f"{off_part}cuda graph: True, gen throughput (token/s): {rate}, #queue-req: 0")


def _log() -> list[str]:
    lines = ["[t] server_args=ServerArgs(model_path='t')"]
    for run in range(2):  # plain decode, bs 1: two runs of a prefill interval and five steady ones
        lines += [_decode(1, 160 + 40 * i, 3000.0 if i == 0 else 525.0 + i) for i in range(6)]
    lines += ["[t] server_args=ServerArgs(model_path='t')", "[t] server_args=ServerArgs(model_path='d')"]
    rates = [1024.0, 467.0, 356.0, 504.0, 341.0, 361.0, 463.0]  # the off path swinging
    lines += [_decode(1, 160 + 40 * i, r, off=True) for i, r in enumerate(rates)]
    return lines


def test_phases_split_by_engine_running_requests_and_batch_and_drop_the_first_interval() -> None:
    found = interval_rates.phases(_log())
    assert [(p.engine, p.running, p.off, len(p.rates)) for p in found] == [(0, 1, False, 5), (0, 1, False, 5),
                                                                          (2, 1, True, 6)]
    assert found[0].rates == (526.0, 527.0, 528.0, 529.0, 530.0)
    assert not found[0].swings(0.85) and found[2].swings(0.85)


def test_the_table_flags_the_swinging_phase_against_plain_decode(tmp_path, capsys) -> None:
    log = tmp_path / "e2e.log"
    log.write_text("\n".join(_log()))
    out = tmp_path / "phases.json"
    assert interval_rates.main([str(log), "--json", str(out)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 2 + 3 and table[-1].endswith("| **yes** |")
    assert "| 412.0 | 0.780 |" in table[-1]  # its median, over plain decode's 528
    rows = json.loads(out.read_text())
    assert [r["swings"] for r in rows] == [False, False, True]


def test_a_missing_log_is_one_line_and_exit_2(tmp_path, capsys) -> None:
    assert interval_rates.main([str(tmp_path / "none.log")]) == 2
    assert "no such file" in capsys.readouterr().err

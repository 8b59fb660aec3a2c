"""The scheduler-loop sampler (benchmark/worker/pysample_site) and its reader (benchmark/tools/pysample.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from benchmark.tools import pysample

REPO = Path(__file__).resolve().parents[1]
SITE = REPO / "benchmark" / "worker" / "pysample_site"

PROGRAM = r"""
import os, sys, time
def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
def heavy():
    spin(0.006)
def light():
    spin(0.001)
def cycle():
    heavy(); light(); time.sleep(0.001)
    for _ in range(2000):  # cyclic garbage: the collector runs while sampled
        a = []; a.append(a)
switch = os.path.join(os.environ["FASTPATH_PYSAMPLE_DIR"], "on")
sys.argv[0]  # the title is this interpreter's argv[0]
time.sleep(1.2)  # the sampler checks the title once a second
open(switch, "w").write("spec-bs1")
time.sleep(0.1)
end = time.monotonic() + 1.5
while time.monotonic() < end:
    cycle()
os.remove(switch)
time.sleep(0.1)
"""


def _run(tmp_path: Path, title: str) -> Path:
    folder = tmp_path / "samples"
    folder.mkdir()
    env = dict(os.environ, FASTPATH_PYSAMPLE_DIR=str(folder), FASTPATH_PYSAMPLE_TITLE=title,
               PYTHONPATH=os.pathsep.join([str(SITE), os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-c", PROGRAM], env=env, check=True, timeout=60)
    return folder


def test_samples_weigh_wall_time_per_frame(tmp_path: Path) -> None:
    folder = _run(tmp_path, title=sys.executable)  # this interpreter's title matches
    [profile] = pysample.load(folder)
    assert profile.label == "spec-bs1" and 1.2 < profile.seconds < 2.0
    node = profile.root.children["<string>:<module>"].children["<string>:cycle"]
    share = {name.rpartition(":")[2]: child.total / node.total for name, child in node.children.items()}
    # heavy spins 6 ms, light 1 ms, the sleep 1 ms (75%, 12.5%, 12.5% of the wall): the shares follow
    # wall time, not GIL hand-offs (which would favour the sleep); loose bounds, as a loaded 2-core
    # machine delays the sampler's wake-ups
    assert 0.45 < share["heavy"] < 0.9 and share["light"] < 0.35, share
    assert share["heavy"] > 2 * share["light"], share
    text = pysample.report(profile, min_pct=5.0)
    assert "heavy  (<string>)" in text and "spec-bs1" in text


def test_other_processes_are_not_sampled(tmp_path: Path) -> None:
    folder = _run(tmp_path, title="sglang::scheduler")
    assert not list(folder.glob("samples-*.json"))


def test_folded_stacks_carry_the_label(tmp_path: Path) -> None:
    folder = _run(tmp_path, title=sys.executable)
    out = tmp_path / "folded.txt"
    assert pysample.main([str(folder), "--folded", str(out)]) == 0
    lines = out.read_text().split("\n")
    assert any(line.startswith("spec-bs1;<string>:<module>;<string>:cycle;<string>:heavy;<string>:spin ") for line in lines)


def test_each_label_gets_the_process_host_facts(tmp_path: Path) -> None:
    folder = _run(tmp_path, title=sys.executable)
    [profile] = pysample.load(folder)
    facts = profile.host
    assert facts is not None and 1.2 < facts["wall_s"] < 2.5, facts
    # The program spins 7 of every 8 ms on its main thread: most of the wall is user CPU time.
    assert 0.4 * facts["wall_s"] < facts["cpu_user_s"] < 2.5 * facts["wall_s"], facts
    assert facts["ctx_voluntary"] >= 0 and facts["ctx_involuntary"] >= 0
    assert facts["cpus"] and all(c["looks"] > 0 for c in facts["cpus"].values()), facts
    assert set(map(int, facts["cpus"])) <= set(facts["affinity"]), facts
    assert "host:" in pysample.report(profile, min_pct=5.0)
    # 2000 tracked allocations a 8-ms cycle pass generation 0's threshold (700 on CPython) every cycle
    assert facts["gc"]["0"]["passes"] >= 20 and facts["gc"]["0"]["s"] > 0, facts["gc"]
    assert "; gc gen 0: " in pysample.host_line(facts)


def test_the_host_line_reads_like_a_sentence() -> None:
    facts = {"wall_s": 2.0, "cpu_user_s": 1.6, "cpu_sys_s": 0.2, "ctx_voluntary": 40, "ctx_involuntary": 7,
             "cpus": {"3": {"looks": 30, "khz_max": 3_100_000}, "9": {"looks": 10, "khz_max": 2_000_000}},
             "affinity": list(range(16))}
    line = pysample.host_line(facts)
    assert "0.90 CPU s per wall s" in line and "7 involuntary" in line, line
    assert "CPU 3 (75%), 9 (25%) at up to 3.10 GHz" in line and "affinity 16 CPUs" in line, line
    assert "gc" not in line, line  # a record without collector passes (or from before they were counted)
    line = pysample.host_line({**facts, "gc": {"0": {"passes": 12, "s": 0.0031}, "2": {"passes": 1, "s": 0.2}}})
    assert line.endswith("; gc gen 0: 12 passes 3.1 ms, gen 2: 1 passes 200.0 ms"), line

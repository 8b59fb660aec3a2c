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

"""CUDA-graph memory of each engine a job started, read from the job's log.

SGLang logs ``Capture <role> CUDA graph begin. ... avail mem=X GB`` before each capture and, once
every runner of the engine (adaptive states included) is captured, ``max_total_num_tokens=...,
available_gpu_mem=Y GB``. An engine's graph memory is X of its first capture less that Y: what its
graphs took together (issue 12 asks the adaptive K set's to stay within 1.5x one K's). A log holds
one section per engine, each starting at a ``server_args=ServerArgs(`` line, which also says whether
the engine speculates. With ``--speculative-adaptive`` each extra runtime state's share is logged as
``Built adaptive runtime state steps=N: elapsed=..., mem=Z GB``; those are kept per step count (the start-up
state's share is the rest). Only TP rank 0's lines count where ranks are named.

With patch 0040 each capture line and each state's line also give what the capture kept, "(graph pool grew +X GB,
buffers +Y GB)", which does not depend on the allocator's cached free memory (the free-memory figure above moved
0.25 GB between two identical starts in session 31). ``held_gb`` sums X + Y over an engine's captures: its top-level
capture lines and each adaptive state's line, not the capture lines inside a state's build (between "Build adaptive
runtime state steps=N begin." and its "Built" line), which that line already includes. None without such lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ENGINE_START = "server_args=ServerArgs("
CAPTURE_BEGIN = re.compile(r"Capture .*CUDA graph begin\..*avail mem=([0-9.]+) GB")
AFTER_CAPTURES = re.compile(r"max_total_num_tokens=.*available_gpu_mem=([0-9.]+) GB")
SPECULATIVE = re.compile(r"speculative_algorithm='[A-Z0-9_]+'")
RANK = re.compile(r"\bTP(\d+)\b")
STATE_BUILT = re.compile(r"Built adaptive runtime state steps=(\d+):.*mem=([0-9.]+)\s*GB")
STATE_BEGIN = re.compile(r"Build adaptive runtime state steps=\d+ begin")
HELD = re.compile(r"\(graph pool grew ([+-]?[0-9.]+) GB, buffers ([+-]?[0-9.]+) GB\)")


@dataclass(frozen=True)
class EngineGraphMemory:
    speculative: bool
    before_gb: float  # free device memory when the engine's first capture began
    after_gb: float  # free device memory once its last capture ended
    states_gb: tuple[tuple[int, float], ...] = ()  # (step count, GB) of each extra adaptive state, in log order
    held_gb: float | None = None  # what its captures kept (patch 0040's figures), None without them

    @property
    def graph_gb(self) -> float:
        return round(self.before_gb - self.after_gb, 3)

    @property
    def startup_state_gb(self) -> float:
        """The start-up state's share: the whole less the extra states' (the engine total without states)."""
        return round(self.graph_gb - sum(gb for _, gb in self.states_gb), 3)


def _rank0(line: str) -> bool:
    rank = RANK.search(line)
    return rank is None or rank.group(1) == "0"


@dataclass
class _Section:
    """What one engine's section of the log has said so far."""

    speculative: bool = False
    before: float | None = None
    after: float | None = None
    states: list[tuple[int, float]] = field(default_factory=list)
    held: float | None = None
    in_state: bool = False  # between a state's "Build ... begin." and its "Built" line

    def engine(self) -> EngineGraphMemory | None:
        if self.before is None or self.after is None:
            return None
        held = None if self.held is None else round(self.held, 3)
        return EngineGraphMemory(self.speculative, self.before, self.after, tuple(self.states), held)


def engines_of(log_text: str) -> list[EngineGraphMemory]:
    """One entry per engine section that captured graphs, in log order."""
    sections = [_Section()]
    for line in log_text.splitlines():
        if not _rank0(line):
            continue
        if ENGINE_START in line:
            sections.append(_Section(speculative=bool(SPECULATIVE.search(line))))
            continue
        sec = sections[-1]
        if STATE_BEGIN.search(line):
            sec.in_state = True
        built = STATE_BUILT.search(line)
        kept = HELD.search(line)
        if kept and sec.after is None and (built or not sec.in_state):
            sec.held = (sec.held or 0.0) + float(kept.group(1)) + float(kept.group(2))
        if built:
            sec.in_state = False
        if built and sec.before is not None:
            sec.states.append((int(built.group(1)), float(built.group(2))))
        begin = CAPTURE_BEGIN.search(line)
        if begin and sec.before is None:
            sec.before = float(begin.group(1))
        done = AFTER_CAPTURES.search(line)
        if done and sec.before is not None:
            sec.after = float(done.group(1))
    return [engine for engine in (sec.engine() for sec in sections) if engine is not None]


def engines_in(log: Path) -> list[EngineGraphMemory]:
    return engines_of(log.read_text(errors="replace")) if log.is_file() else []

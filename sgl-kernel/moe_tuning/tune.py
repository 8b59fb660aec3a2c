"""The tuning loop: time every candidate config per (GEMM, M), keep the fastest, write SGLang's files.

The loop does not know how a config is timed: ``tune_gemm`` takes a ``Timer`` (on a GPU host,
``gpu_timer.GraphTimer``: SGLang's own kernel replayed from a CUDA graph). What it owns:

* **resume**: every timing is appended to a JSON-lines log as soon as it is measured (a failed
  config too, with its error), and a rerun with the same log skips what is there, so an
  interrupted or time-boxed run (a device call ends after ten minutes) goes on where it stopped;
* **pre-filter**: an optional ``Screen`` refuses configs before they are timed (on the H200, the
  sm_120 cross-compile check: shared memory, spills, mma.sync), its verdicts logged the same way;
* **progress**: one line per (GEMM, M) rewritten in place, with the count and the best so far;
* **output**: the fastest config per M, for the up (gate/up) and ``_down`` files SGLang reads,
  written with ``config_file.write_configs`` and checked with ``config_file.check_pair``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from moe_tuning.config_file import Problem, check_pair, write_configs
from moe_tuning.search_space import KernelConfig, SearchSpace, candidates
from moe_tuning.shapes import Device, Gemm, RankShapes

# M = batch size x draft tokens of an EAGLE verify (and plain decode at M = batch size)
VERIFY_MS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)

Timer = Callable[[Gemm, int, KernelConfig], float]  # microseconds of one launch; raises if it cannot run
Screen = Callable[[Gemm, KernelConfig], list[str]]  # reasons to refuse a config before timing (empty: keep)


@dataclass(frozen=True)
class Trial:
    """One logged outcome: a time in µs, or why there is none."""

    gemm: str
    m: int | None  # None: a screen verdict, which holds for every M
    config: KernelConfig
    us: float | None = None
    error: str | None = None

    def to_json(self) -> str:
        return json.dumps({"gemm": self.gemm, "m": self.m, "config": self.config.kwargs(), "us": self.us,
                           "error": self.error})

    @classmethod
    def from_json(cls, line: str) -> Trial:
        row = json.loads(line)
        return cls(row["gemm"], row["m"], KernelConfig.from_kwargs(row["config"]), row.get("us"), row.get("error"))


class TrialLog:
    """The append-only log a run resumes from."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.trials: dict[tuple[str, int | None, KernelConfig], Trial] = {}
        lines = path.read_text().splitlines() if path.is_file() else []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                trial = Trial.from_json(line)
            except (ValueError, KeyError, TypeError):
                if number == len(lines):
                    continue  # the last line of a run killed while writing it
                raise
            self.trials[(trial.gemm, trial.m, trial.config)] = trial

    def get(self, gemm: str, m: int | None, cfg: KernelConfig) -> Trial | None:
        return self.trials.get((gemm, m, cfg))

    def add(self, trial: Trial) -> None:
        self.trials[(trial.gemm, trial.m, trial.config)] = trial
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(trial.to_json() + "\n")


class Progress:
    """``[gate_up M=4] 37/120 timed, best 41.2 µs (BM16 BN64 ...)``, rewritten in place."""

    def __init__(self, stream: TextIO = sys.stderr, every_s: float = 0.5) -> None:
        self.stream, self.every_s, self.last = stream, every_s, 0.0

    def show(self, gemm: Gemm, m: int, done: int, total: int, best: Trial | None, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self.last < self.every_s:
            return
        self.last = now
        bar = "#" * (20 * done // max(total, 1))
        tail = f", best {best.us:.1f} µs ({best.config.label()})" if best and best.us is not None else ""
        self.stream.write(f"\r[{gemm.name} M={m}] [{bar:<20}] {done}/{total}{tail}" + ("\n" if final else ""))
        self.stream.flush()


def screened(gemm: Gemm, configs: Iterable[KernelConfig], screen: Screen | None, log: TrialLog) -> list[KernelConfig]:
    """The configs the screen keeps; each verdict is logged once and reused on resume."""
    if screen is None:
        return list(configs)
    kept = []
    for cfg in configs:
        verdict = log.get(gemm.name, None, cfg)
        if verdict is None:
            reasons = screen(gemm, cfg)
            verdict = Trial(gemm.name, None, cfg, error="; ".join(reasons) or None)
            log.add(verdict)
        if verdict.error is None:
            kept.append(cfg)
    return kept


def tune_gemm(gemm: Gemm, dev: Device, ms: Iterable[int], timer: Timer, log: TrialLog,
              space: SearchSpace = SearchSpace(), screen: Screen | None = None,
              progress: Progress | None = None, deadline: float | None = None,
              block_m: dict[int, int] | None = None) -> dict[int, KernelConfig]:
    """The fastest config per M (only the Ms whose every candidate was timed before ``deadline``).

    ``block_m`` pins BLOCK_SIZE_M per M: SGLang aligns the tokens once, with the gate/up config's
    BLOCK_SIZE_M, and the down kernel reuses that alignment, so the down GEMM is tuned at the
    gate/up winner's BLOCK_SIZE_M (an M missing from ``block_m`` is skipped).
    """
    best_per_m: dict[int, KernelConfig] = {}
    for m in ms:
        if block_m is not None and m not in block_m:
            continue
        pool = candidates(gemm, dev, m, space)
        if block_m is not None:
            pool = [cfg for cfg in pool if cfg.block_m == block_m[m]]
        configs = screened(gemm, pool, screen, log)
        best: Trial | None = None
        complete = True
        for i, cfg in enumerate(configs, 1):
            trial = log.get(gemm.name, m, cfg)
            if trial is None:
                if deadline is not None and time.monotonic() > deadline:
                    complete = False
                    break
                try:
                    trial = Trial(gemm.name, m, cfg, us=float(timer(gemm, m, cfg)))
                except Exception as exc:  # noqa: BLE001 - a config that cannot run is logged, not fatal
                    trial = Trial(gemm.name, m, cfg, error=f"{type(exc).__name__}: {exc}"[:300])
                log.add(trial)
            if trial.us is not None and (best is None or trial.us < best.us):
                best = trial
            if progress:
                progress.show(gemm, m, i, len(configs), best)
        if progress:
            progress.show(gemm, m, len(configs), len(configs), best, final=True)
        if not complete:
            break
        if best is not None:
            best_per_m[m] = best.config
    return best_per_m


def tune_pair(shapes: RankShapes, dev: Device, ms: Iterable[int], timer: Timer, log: TrialLog,
              space: SearchSpace = SearchSpace(), screen: Screen | None = None,
              progress: Progress | None = None, deadline: float | None = None,
              ) -> tuple[dict[int, KernelConfig], dict[int, KernelConfig]]:
    """(gate/up, down) winners per M; down at each M's gate/up BLOCK_SIZE_M."""
    ms = list(ms)
    up = tune_gemm(shapes.gate_up, dev, ms, timer, log, space, screen, progress, deadline)
    down = tune_gemm(shapes.down, dev, ms, timer, log, space, screen, progress, deadline,
                     block_m={m: cfg.block_m for m, cfg in up.items()})
    return up, down


def write_pair(out: Path, shapes: RankShapes, dev: Device, up: dict[int, KernelConfig],
               down: dict[int, KernelConfig]) -> tuple[Path, Path, list[Problem]]:
    """Write the up and ``_down`` files for ``dev`` into ``out``; the checker's problems (empty: fine)."""
    up_path = out / shapes.file_name(dev, down=False)
    down_path = out / shapes.file_name(dev, down=True)
    keys = sorted(set(up) & set(down))
    write_configs(up_path, {m: up[m] for m in keys})
    write_configs(down_path, {m: down[m] for m in keys})
    return up_path, down_path, check_pair(up_path, down_path)

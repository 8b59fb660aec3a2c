"""Where one decode step or EAGLE-3 cycle spends its wall time, per phase, from a profiler trace.

Usage:
  python benchmark/cycle_phases.py TRACE_DIR_OR_FILE... [--json OUT.json] [--png OUT.png]
      [--accept-len 3.0] [--timeline-cycles 3] [--launches N]

Reads the torch-profiler traces that SGLang's ``start_profile`` writes (one per TP rank) and
cuts the scheduler thread's timeline into **cycles**: from the start of one
``scheduler.run_batch`` span to the start of the next (a prefill batch is not a cycle).
SGLang 0.5.17 already marks the spans this needs (``srt/utils/nvtx_utils.py``: the
scheduler's ``scheduler.*`` spans, the EAGLE worker's ``draft`` / ``draft_extend``, the model
runner's ``step[MODE bs=..]``); nothing is patched for it.

Phases of a cycle (CPU wall, on the scheduler thread):
  prepare        run_batch start -> its first marked child (batch/forward-input building)
  draft          the ``draft`` span (the draft CUDA-graph replay and its input prep)
  draft_to_verify  draft end -> target forward start (verify input and attention metadata)
  target_forward the ``step[TARGET_VERIFY|DECODE ..]`` span (the target graph replay or eager forward)
  accept         target forward end -> ``draft_extend`` start (sampling, acceptance, KV bookkeeping)
  draft_extend   the ``draft_extend`` span
  run_tail       the rest of run_batch (output copy set-up, future publishing)
  result         ``scheduler.process_batch_result`` (the previous batch's outputs, overlapped)
  recv           ``scheduler.recv_requests`` + ``scheduler.process_input_requests`` (incl. the
                 gloo broadcast of requests from rank 0 to the other ranks)
  schedule       ``scheduler.get_next_batch_to_run``
  loop_other     what is left of the cycle (event-loop Python between the spans)

GPU: every kernel, memcpy and memset is attributed to the phase whose CPU span holds the
CUDA call that launched it (matched by correlation id; the kernels of a graph replay share
the ``cudaGraphLaunch``'s id). Per cycle: GPU busy = the union of all GPU events clipped to
the cycle's wall window (whichever cycle launched them), idle = wall - busy. Host syncs per cycle: ``cudaStreamSynchronize``,
``cudaEventSynchronize``, ``cudaDeviceSynchronize`` calls (count and blocked time) and
device-to-host copies (``Memcpy DtoH`` events, which back ``.item()``, ``.tolist()``,
``.cpu()``). Slow CUDA calls: any other runtime or driver call on the scheduler thread that holds
the host for ``SLOW_CALL_US`` or more (a pageable host-to-device copy waiting for its stream, an
allocation, a large graph's launch), by phase and name (``--slow-calls``). Graph launches (``--graphs``), per phase: the host time of the
``cudaGraphLaunch`` call, the delay from its start to the graph's first GPU op, and how long the GPU
idled between that first op and the call's return (**starved**): the driver hands a graph's work to the
GPU while the call runs, so a graph launched onto an idle GPU starts within ~0.1 ms and then waits for
the rest of its launch. The GPU-bound ratio of speculation: (no-spec GPU busy per token) over (spec
GPU busy per cycle / accept length), each from its own trace; printed when both are given.

The profiler adds a few µs of host time per recorded op, so host phases read longer than
in an unprofiled run; GPU times are not inflated. Exit status: 0 done, 2 no cycle found.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmark.core import stats as core_stats
from benchmark.core.errors import BenchError
from benchmark.tools.trace_summary import (
    CUDA_API_CATS, GPU_CATS, kernel_category, load_trace, trace_files, union_length)

RUN_BATCH = "scheduler.run_batch"
LOOP_SPANS = {"scheduler.process_batch_result": "result", "scheduler.recv_requests": "recv",
              "scheduler.process_input_requests": "recv", "scheduler.get_next_batch_to_run": "schedule"}
STEP = re.compile(r"^step\[(?P<mode>[A-Z_]+) bs=(?P<bs>\d+)")
CYCLE_MODES = ("TARGET_VERIFY", "DECODE")
PHASES = ("prepare", "draft", "draft_to_verify", "target_forward", "accept", "draft_extend", "run_tail",
          "result", "recv", "schedule", "loop_other")
SYNC_CALLS = ("cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize")
SLOW_CALL_US = 40.0


def is_graph_launch(call_name: str) -> bool:
    """A CUDA runtime or driver call that launches a captured graph (``cudaGraphLaunch``, ``cuGraphLaunch``)."""
    return "Launch" in call_name and "Graph" in call_name


@dataclass
class Span:
    name: str
    start: float  # µs
    end: float

    @property
    def dur(self) -> float:
        return self.end - self.start


@dataclass
class Cycle:
    """One decode step (no speculation) or EAGLE-3 cycle on one rank."""

    mode: str
    bs: int
    start: float
    end: float
    phases: dict[str, Span] = field(default_factory=dict)

    @property
    def wall(self) -> float:
        return self.end - self.start


@dataclass
class CycleStats:
    """Medians over the cycles of one trace (one rank), in ms unless named otherwise."""

    trace: str
    mode: str
    bs: int
    cycles: int
    wall_ms: float
    gpu_busy_ms: float
    gpu_idle_frac: float
    cpu_ms: dict[str, float]
    gpu_ms: dict[str, float]
    gpu_categories_ms: dict[str, float]
    syncs_per_cycle: dict[str, float]
    sync_wait_ms: float
    d2h_copies_per_cycle: float
    launches_per_cycle: dict[str, float]
    slow_call_ms: float = 0.0
    slow_calls_ms: dict[str, float] = field(default_factory=dict)
    graph_launches_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    graph_starved_ms: float = 0.0


def _spans(events: list[dict[str, Any]], thread: Any) -> list[Span]:
    out = [Span(str(e["name"]), float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0))) for e in events
           if e.get("cat") == "user_annotation" and e.get("tid") == thread and "ts" in e]
    return sorted(out, key=lambda s: s.start)


def scheduler_thread(events: list[dict[str, Any]]) -> Any:
    """The thread that runs ``scheduler.run_batch`` (the one with the most of them)."""
    counts: dict[Any, int] = defaultdict(int)
    for e in events:
        if e.get("cat") == "user_annotation" and e.get("name") == RUN_BATCH:
            counts[e.get("tid")] += 1
    if not counts:
        raise BenchError("no scheduler.run_batch span: not a trace of SGLang's scheduler (0.5.17 or later)")
    return max(counts, key=counts.__getitem__)


def _inside(span: Span, outer: Span) -> bool:
    return span.start >= outer.start and span.end <= outer.end + 1e-3


def find_cycles(spans: list[Span]) -> list[Cycle]:
    """Cycles of the scheduler thread: run_batch to the next run_batch, decode/verify batches only."""
    runs = [s for s in spans if s.name == RUN_BATCH]
    cycles: list[Cycle] = []
    for run, nxt in zip(runs, runs[1:]):
        inner = [s for s in spans if s is not run and _inside(s, run)]
        steps = [(m, s) for s in inner if (m := STEP.match(s.name)) and m["mode"] in CYCLE_MODES]
        if not steps:
            continue  # a prefill (EXTEND) batch or an idle one
        match, step = steps[0]
        cycle = Cycle(match["mode"], int(match["bs"]), run.start, nxt.start)
        cycle.phases["target_forward"] = step
        for name in ("draft", "draft_extend"):
            found = [s for s in inner if s.name == name]
            if found:
                cycle.phases[name] = found[0]
        _fill_gaps(cycle, run)
        for s in spans:
            if s.start >= run.end and s.end <= nxt.start + 1e-3 and s.name in LOOP_SPANS:
                key = LOOP_SPANS[s.name]
                if key in cycle.phases:  # two recv spans: keep their total as one synthetic span
                    prev = cycle.phases[key]
                    cycle.phases[key] = Span(key, prev.start, prev.start + prev.dur + s.dur)
                else:
                    cycle.phases[key] = s
        cycles.append(cycle)
    return cycles


def _fill_gaps(cycle: Cycle, run: Span) -> None:
    """prepare / draft_to_verify / accept / run_tail: the unmarked stretches of run_batch."""
    marked = sorted(cycle.phases.values(), key=lambda s: s.start)
    fwd = cycle.phases["target_forward"]
    draft, extend = cycle.phases.get("draft"), cycle.phases.get("draft_extend")
    cycle.phases["prepare"] = Span("prepare", run.start, marked[0].start)
    if draft is not None:
        cycle.phases["draft_to_verify"] = Span("draft_to_verify", draft.end, fwd.start)
    if extend is not None:
        cycle.phases["accept"] = Span("accept", fwd.end, extend.start)
    cycle.phases["run_tail"] = Span("run_tail", max(s.end for s in marked), run.end)


def phase_at(cycle: Cycle, ts: float) -> str:
    """The phase whose CPU span holds ``ts`` (the innermost marked one wins), else loop_other."""
    for name in ("draft", "target_forward", "draft_extend", "result", "recv", "schedule",
                 "prepare", "draft_to_verify", "accept", "run_tail"):
        span = cycle.phases.get(name)
        if span is not None and span.start <= ts < span.end:
            return name
    return "loop_other"


def _cycle_index(cycles: list[Cycle], ts: float) -> int | None:
    lo, hi = 0, len(cycles) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if ts < cycles[mid].start:
            hi = mid - 1
        elif ts >= cycles[mid].end:
            lo = mid + 1
        else:
            return mid
    return None


@dataclass
class _CycleTally:
    cpu: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    gpu: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    categories: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    syncs: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    sync_wait: float = 0.0
    gpu_busy: float = 0.0
    d2h: int = 0
    launches: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    slow_calls: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    graphs: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))


GRAPH_FIELDS = ("host", "first_op", "starved")


def analyse(events: list[dict[str, Any]], label: str = "") -> tuple[CycleStats, list[Cycle], list[_CycleTally]]:
    thread = scheduler_thread(events)
    cycles = find_cycles(_spans(events, thread))
    if not cycles:
        raise BenchError(f"{label}: no decode or verify cycle between two scheduler.run_batch spans")
    tallies = [_CycleTally() for _ in cycles]
    launch_phase: dict[Any, tuple[int, str]] = {}
    gpu_spans: list[tuple[float, float]] = []
    graph_calls: list[tuple[int, str, Any, float, float]] = []  # cycle, phase, correlation, call start, end
    first_op: dict[Any, float] = {}
    for e, idx, phase in cuda_calls(events, cycles, thread):  # CPU side, by cycle and phase
        name = str(e.get("name", ""))
        corr = (e.get("args") or {}).get("correlation")
        if corr is not None:
            launch_phase[corr] = (idx, phase)
        dur = float(e.get("dur", 0.0))
        if name in SYNC_CALLS:
            tallies[idx].syncs[name] += 1
            tallies[idx].sync_wait += dur
            continue
        if "Launch" in name:
            graph = is_graph_launch(name)
            tallies[idx].launches["graph" if graph else "kernel"] += 1
            if graph:
                start = float(e["ts"])
                graph_calls.append((idx, phase, corr, start, start + dur))
        if dur >= SLOW_CALL_US:
            tallies[idx].slow_calls[f"{phase}: {name}"] += dur
    for e in events:  # GPU side: each event to the phase that launched it
        cat = e.get("cat")
        if cat not in GPU_CATS or "ts" not in e:
            continue
        start, dur = float(e["ts"]), float(e.get("dur", 0.0))
        name = str(e.get("name", ""))
        corr = (e.get("args") or {}).get("correlation")
        where = launch_phase.get(corr)
        idx = where[0] if where else _cycle_index(cycles, start)
        if idx is None:
            continue
        tally = tallies[idx]
        tally.gpu[where[1] if where else "unattributed"] += dur
        tally.categories[kernel_category(name, str(cat))] += dur
        if "DtoH" in name or "Device -> Pinned" in name or "Device -> Pageable" in name:
            tally.d2h += 1
        gpu_spans.append((start, start + dur))
        if corr is not None:
            first_op[corr] = min(first_op.get(corr, start), start)
    for idx, phase, corr, start, end in graph_calls:
        first = first_op.get(corr)
        if first is None:
            continue
        starved = end - first - _busy_within(gpu_spans, first, end) if end > first else 0.0
        graph = tallies[idx].graphs[phase]
        for key, value in zip(GRAPH_FIELDS, (end - start, first - start, starved)):
            graph[key] += value
    for cycle, tally in zip(cycles, tallies):
        tally.gpu_busy = _busy_within(gpu_spans, cycle.start, cycle.end)
        covered = sum(s.dur for k, s in cycle.phases.items())
        for name, span in cycle.phases.items():
            tally.cpu[name] += span.dur
        tally.cpu["loop_other"] += max(0.0, cycle.wall - covered)
    return _stats(label, cycles, tallies), cycles, tallies


def cuda_calls(events: list[dict[str, Any]], cycles: list[Cycle], thread: Any):
    """The thread's CUDA runtime and driver calls that fall in a cycle: (event, cycle index, phase)."""
    for e in events:
        if e.get("cat") not in CUDA_API_CATS or e.get("tid") != thread or "ts" not in e:
            continue
        ts = float(e["ts"])
        idx = _cycle_index(cycles, ts)
        if idx is not None:
            yield e, idx, phase_at(cycles[idx], ts)


def launches_by_phase(events: list[dict[str, Any]], cycles: list[Cycle]) -> dict[str, Counter]:
    """Per phase, how often each eager kernel (runtime or driver API, so Triton's too), copy or memset
    was launched from it (all cycles)."""
    thread = scheduler_thread(events)
    names = {(e.get("args") or {}).get("correlation"): str(e.get("name", ""))
             for e in events if e.get("cat") in GPU_CATS}
    per: dict[str, Counter] = defaultdict(Counter)
    for e, _, phase in cuda_calls(events, cycles, thread):
        name = str(e.get("name", ""))
        if "Graph" in name or not ("Launch" in name or name.startswith(("cudaMemcpy", "cudaMemset"))):
            continue
        per[phase][names.get((e.get("args") or {}).get("correlation"), name)] += 1
    return per


def launch_lines(per: dict[str, Counter], n_cycles: int, top: int) -> list[str]:
    """The ``top`` eager launches of each phase, per cycle."""
    lines = []
    for phase in PHASES:
        counts = per.get(phase)
        if counts:
            lines.append(f"{phase}: {sum(counts.values()) / n_cycles:.1f} eager launches per cycle")
            lines += [f"  {n / n_cycles:5.1f}  {name[:100]}" for name, n in counts.most_common(top)]
    return lines


def _busy_within(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    """GPU busy time inside [lo, hi): the union of every GPU event, whoever launched it, clipped."""
    return union_length((max(s, lo), min(e, hi)) for s, e in spans if e > lo and s < hi)


def _median_ms(values: list[float]) -> float:
    return round(statistics.median(values) / 1000.0, 4) if values else 0.0


def _stats(label: str, cycles: list[Cycle], tallies: list[_CycleTally]) -> CycleStats:
    # Steady state: the dominant (mode, bs), dropping the first cycle (it overlaps the prefill's tail).
    key = max({(c.mode, c.bs) for c in cycles}, key=lambda k: sum((c.mode, c.bs) == k for c in cycles))
    pairs = [(c, t) for c, t in zip(cycles, tallies) if (c.mode, c.bs) == key][1:] or \
        [(c, t) for c, t in zip(cycles, tallies) if (c.mode, c.bs) == key]
    busy = [t.gpu_busy for _, t in pairs]
    walls = [c.wall for c, _ in pairs]
    names = sorted({n for _, t in pairs for n in t.gpu})
    cats = sorted({n for _, t in pairs for n in t.categories})
    return CycleStats(
        trace=label, mode=key[0], bs=key[1], cycles=len(pairs),
        wall_ms=_median_ms(walls), gpu_busy_ms=_median_ms(busy),
        gpu_idle_frac=round(statistics.median(1 - b / w for b, w in zip(busy, walls)), 4),
        cpu_ms={p: _median_ms([t.cpu.get(p, 0.0) for _, t in pairs]) for p in PHASES},
        gpu_ms={p: _median_ms([t.gpu.get(p, 0.0) for _, t in pairs]) for p in names},
        gpu_categories_ms={c: _median_ms([t.categories.get(c, 0.0) for _, t in pairs]) for c in cats},
        syncs_per_cycle={s: statistics.mean(t.syncs.get(s, 0) for _, t in pairs) for s in SYNC_CALLS},
        sync_wait_ms=_median_ms([t.sync_wait for _, t in pairs]),
        d2h_copies_per_cycle=statistics.mean(t.d2h for _, t in pairs),
        launches_per_cycle={k: statistics.mean(t.launches.get(k, 0) for _, t in pairs) for k in ("kernel", "graph")},
        slow_call_ms=_median_ms([sum(t.slow_calls.values()) for _, t in pairs]),
        slow_calls_ms={k: round(statistics.mean(t.slow_calls.get(k, 0.0) for _, t in pairs) / 1000.0, 4)
                       for k in sorted({k for _, t in pairs for k in t.slow_calls})},
        graph_launches_ms={ph: {f: _median_ms([t.graphs[ph][f] if ph in t.graphs else 0.0 for _, t in pairs])
                                for f in GRAPH_FIELDS}
                           for ph in sorted({ph for _, t in pairs for ph in t.graphs}, key=PHASES.index)},
        graph_starved_ms=_median_ms([sum(g["starved"] for g in t.graphs.values()) for _, t in pairs]),
    )


def graph_lines(s: CycleStats) -> list[str]:
    """Per phase, the graph launch's host time, the delay to its first GPU op and the GPU's starved time."""
    lines = [f"{s.trace} ({s.mode} bs={s.bs}): graph launches, ms per cycle (medians); GPU starved in all "
             f"{s.graph_starved_ms:.3f}"]
    for phase, g in s.graph_launches_ms.items():
        lines.append(f"  {phase:<16} launch {g['host']:7.3f}  first op after {g['first_op']:7.3f}  "
                     f"starved {g['starved']:7.3f}")
    return lines if s.graph_launches_ms else lines + ["  none"]


def gpu_bound_ratio(nospec: CycleStats, spec: CycleStats, accept_len: float) -> float:
    """Speed-up of speculation if neither side left the GPU idle: per-token GPU time ratio."""
    return core_stats.gpu_bound_ratio(nospec.gpu_busy_ms, spec.gpu_busy_ms, accept_len)


def _rank(label: str) -> str:
    found = re.search(r"TP-\d+", label)
    return found.group(0) if found else "rank ?"


def ratio_lines(stats: list[CycleStats], accept_len: float) -> list[str]:
    """The GPU-bound ratio for every (bs, rank) with a decode and a verify trace."""
    decode = {(s.bs, _rank(s.trace)): s for s in stats if s.mode == "DECODE"}
    lines = []
    for s in stats:
        base = decode.get((s.bs, _rank(s.trace)))
        if s.mode == "TARGET_VERIFY" and base is not None and s.gpu_busy_ms > 0:
            lines.append(f"gpu-bound ratio bs={s.bs} ({_rank(s.trace)}): "
                         f"{gpu_bound_ratio(base, s, accept_len):.2f}x (decode {base.gpu_busy_ms:.2f} ms/token, "
                         f"EAGLE-3 {s.gpu_busy_ms:.2f} ms per {accept_len:g} tokens)")
    return lines


def table(stats: list[CycleStats]) -> str:
    head = f"{'trace':<34} {'mode':<13} {'bs':>3} {'n':>3} {'wall':>7} {'gpu':>7} {'idle':>5}  " + \
        " ".join(f"{p[:8]:>8}" for p in PHASES) + f" {'syncs':>5} {'wait':>5} {'d2h':>4} {'krnl':>5} {'graph':>5} {'slow':>5}"
    rows = [head]
    for s in stats:
        syncs = sum(s.syncs_per_cycle.values())
        rows.append(f"{s.trace[-34:]:<34} {s.mode:<13} {s.bs:>3} {s.cycles:>3} {s.wall_ms:>7.2f} "
                    f"{s.gpu_busy_ms:>7.2f} {s.gpu_idle_frac:>5.0%}  "
                    + " ".join(f"{s.cpu_ms.get(p, 0.0):>8.2f}" for p in PHASES)
                    + f" {syncs:>5.1f} {s.sync_wait_ms:>5.2f} {s.d2h_copies_per_cycle:>4.1f}"
                    f" {s.launches_per_cycle['kernel']:>5.0f} {s.launches_per_cycle['graph']:>5.0f}"
                    f" {s.slow_call_ms:>5.2f}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", help="trace folders (one trace per rank) or trace files")
    p.add_argument("--json", type=Path, default=None, help="write every trace's statistics here")
    p.add_argument("--png", type=Path, default=None, help="write a timeline of the first trace of each folder")
    p.add_argument("--timeline-cycles", type=int, default=3, help="cycles drawn in the timeline (3)")
    p.add_argument("--launches", type=int, default=0, metavar="N",
                   help="also print, per trace and phase, the N most frequent eager launches (kernel, copy, memset)")
    p.add_argument("--slow-calls", action="store_true",
                   help=f"also print, per trace, the CUDA calls (not syncs) that held the host {SLOW_CALL_US:g} µs "
                        "or more, by phase and name, in ms per cycle")
    p.add_argument("--graphs", action="store_true",
                   help="also print, per trace and phase, each graph launch's host time, the delay to its first "
                        "GPU op and how long the GPU then idled waiting for the rest of the launch (starved)")
    p.add_argument("--accept-len", type=float, default=None,
                   help="tokens per EAGLE-3 cycle: prints the GPU-bound ratio of each (bs, rank) that has both "
                        "a DECODE and a TARGET_VERIFY trace")
    args = p.parse_args(argv)
    try:
        stats: list[CycleStats] = []
        drawn: list[tuple[str, list[Cycle], list[dict[str, Any]]]] = []
        for path in args.paths:
            for trace in trace_files(path):
                events = load_trace(trace)
                label = f"{Path(path).name}/{trace.name.split('-', 1)[-1]}"
                s, cycles, _ = analyse(events, label)
                stats.append(s)
                drawn.append((label, cycles, events))
    except BenchError as exc:
        print(f"cycle_phases: {exc}", file=sys.stderr)
        return 2
    print(table(stats))
    for s, (label, cycles, events) in zip(stats, drawn) if args.launches else ():
        print(f"\n{label} ({s.mode} bs={s.bs}):")
        print("\n".join(launch_lines(launches_by_phase(events, cycles), len(cycles), args.launches)))
    for s in stats if args.slow_calls else ():
        print(f"\n{s.trace} ({s.mode} bs={s.bs}): slow CUDA calls, ms per cycle")
        print("\n".join(f"  {ms:7.3f}  {key}" for key, ms in sorted(s.slow_calls_ms.items(), key=lambda kv: -kv[1]))
              or "  none")
    for s in stats if args.graphs else ():
        print()
        print("\n".join(graph_lines(s)))
    if args.accept_len:
        for line in ratio_lines(stats, args.accept_len):
            print(line)
    if args.json:
        args.json.write_text(json.dumps([asdict(s) for s in stats], indent=1) + "\n")
    if args.png:
        from benchmark.tools.cycle_timeline import draw

        draw(drawn, args.png, args.timeline_cycles)
    return 0


if __name__ == "__main__":
    sys.exit(main())

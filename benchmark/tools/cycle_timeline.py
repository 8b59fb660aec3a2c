"""A timeline PNG of a few decode steps / EAGLE-3 cycles: CPU phases over GPU activity, per trace.

Called by ``cycle_phases.py --png``. One pair of rows per trace (one TP rank): the scheduler
thread's phases on top, the GPU's kernels below, each kernel coloured by the CPU phase that
launched it (grey: launched outside the drawn cycles). White on the GPU row is the GPU idle. Hatched
boxes on the CPU row are the host's ``cudaGraphLaunch`` calls: a large graph launched onto an idle GPU
starts within ~0.1 ms and then idles until the rest is handed over (``cycle_phases.py --graphs``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmark.tools.cycle_phases import PHASES, Cycle, cuda_calls, is_graph_launch, scheduler_thread
from benchmark.tools.trace_summary import GPU_CATS

COLORS = dict(zip(PHASES, ("#bdbdbd", "#1f77b4", "#9edae5", "#d62728", "#ff7f0e", "#2ca02c", "#c7c7c7",
                           "#9467bd", "#e377c2", "#8c564b", "#f7f7f7")))


def _gpu_bars(events: list[dict[str, Any]], cycles: list[Cycle], lo: float, hi: float) -> list[tuple[float, float, str]]:
    phase_of = {(e.get("args") or {}).get("correlation"): phase
                for e, _, phase in cuda_calls(events, cycles, scheduler_thread(events))}
    bars = []
    for e in events:
        if e.get("cat") in GPU_CATS and "ts" in e:
            start, end = float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0))
            if end > lo and start < hi:
                bars.append((start, end, phase_of.get((e.get("args") or {}).get("correlation"), "")))
    return bars


def _graph_launch_bars(events: list[dict[str, Any]], cycles: list[Cycle], lo: float,
                       hi: float) -> list[tuple[float, float]]:
    """(start, end) of every graph-launch call on the scheduler thread that overlaps [lo, hi)."""
    calls = cuda_calls(events, cycles, scheduler_thread(events))
    spans = ((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0))) for e, _, _ in calls
             if is_graph_launch(str(e.get("name", ""))))
    return [(start, end) for start, end in spans if end > lo and start < hi]


def draw(traces: list[tuple[str, list[Cycle], list[dict[str, Any]]]], out: Path, n_cycles: int = 3) -> None:
    """One figure: for each trace, ``n_cycles`` steady cycles (from the third) on a shared ms axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, axes = plt.subplots(len(traces), 1, figsize=(14, 1.3 * len(traces) + 1.2), squeeze=False)
    for ax, (label, cycles, events) in zip(axes[:, 0], traces):
        shown = cycles[2:2 + n_cycles] or cycles[:n_cycles]
        lo, hi = shown[0].start, shown[-1].end
        for c in shown:
            for name, span in c.phases.items():
                ax.broken_barh([((span.start - lo) / 1e3, span.dur / 1e3)], (1.1, 0.8),
                               facecolors=COLORS.get(name, "#f7f7f7"), edgecolor="none")
            ax.axvline((c.start - lo) / 1e3, color="black", lw=0.6)
        for start, end in _graph_launch_bars(events, cycles, lo, hi):
            ax.broken_barh([((start - lo) / 1e3, (end - start) / 1e3)], (1.1, 0.8), facecolors="none",
                           edgecolor="black", hatch="////", lw=0.5)
        for start, end, phase in _gpu_bars(events, cycles, lo, hi):
            ax.broken_barh([((max(start, lo) - lo) / 1e3, (min(end, hi) - max(start, lo)) / 1e3)], (0.1, 0.8),
                           facecolors=COLORS.get(phase, "#7f7f7f"), edgecolor="none")
        ax.set_yticks([0.5, 1.5], ["GPU", "CPU"])
        ax.set_xlim(0, (hi - lo) / 1e3)
        ax.set_ylim(0, 2)
        ax.set_title(f"{label}: {len(shown)} cycles of {cycles[0].mode} bs={cycles[0].bs}", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("ms")
    handles = [Patch(color=COLORS[p], label=p) for p in PHASES if p != "loop_other"]
    handles.append(Patch(facecolor="none", edgecolor="black", hatch="////", label="graph launch call"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(out, dpi=110)
    plt.close(fig)

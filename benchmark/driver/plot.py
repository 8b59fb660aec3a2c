"""PNG plots of a results.json, written beside it.

Usage: python benchmark/plot.py RESULTS_DIR_OR_JSON

  step_CONFIG_BACKEND_topkT.png: decode and verify latency (ms) against batch size,
    one colour per draft-token count (black: decode), one line style per variant,
    hollow markers where the step ran eager, a vertical bar over the rounds' min..max,
    dotted the bandwidth floor; below it the last variant over the first.
  e2e_CONFIG_BACKEND.png: output tokens/s against batch size, speculation off and on.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from benchmark.core.errors import BenchError
from benchmark.driver.schema import Record, ResultSet

STYLES = ("-", "--", ":", "-.")


def _series(records: list[Record]) -> dict[tuple, list[Record]]:
    series: dict[tuple, list[Record]] = defaultdict(list)
    for r in records:
        series[(r.variant, r.mode, r.k)].append(r)
    return {key: sorted(rs, key=lambda r: r.bs) for key, rs in series.items()}


def _bs_axis(ax, sizes: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([str(b) for b in sizes])


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_steps(plt, results: ResultSet, out_dir: Path) -> list[Path]:
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for r in results.records:
        if r.metric == "latency_ms" and r.mode in ("decode", "verify"):
            groups[(r.config, r.backend)].append(r)
    written = []
    variants = list(dict.fromkeys(r.variant for r in results.records))
    for (config, backend), records in sorted(groups.items()):
        for topk in sorted({r.topk for r in records if r.mode == "verify"}):
            chosen = [r for r in records if r.mode == "decode" or r.topk == topk]
            ks = sorted({r.k for r in chosen if r.mode == "verify"})
            colors = {k: plt.cm.viridis(i / max(1, len(ks) - 1)) for i, k in enumerate(ks)}
            fig, (ax, ax_ratio) = plt.subplots(2, 1, figsize=(8, 8), sharex=True,
                                               gridspec_kw={"height_ratios": [3, 1]})
            series = _series(chosen)
            for (variant, mode, k), rs in sorted(series.items()):
                color = "black" if mode == "decode" else colors[k]
                style = STYLES[variants.index(variant) % len(STYLES)]
                label = f"{variant} {'decode' if mode == 'decode' else f'verify k={k}'}"
                ax.plot([r.bs for r in rs], [r.value for r in rs], style, color=color, label=label)
                for r in rs:
                    ax.plot(r.bs, r.value, "o", color=color, mfc=color if r.graph else "none", ms=4)
                    if len(r.rounds) > 1:
                        ax.vlines(r.bs, *r.interval(), color=color, lw=0.8)
                if variant == variants[0] and all(r.floor_ms is not None for r in rs):
                    ax.plot([r.bs for r in rs], [r.floor_ms for r in rs], ":", color=color, lw=0.8, alpha=0.6)
            if len(variants) > 1:
                for (variant, mode, k), rs in sorted(series.items()):
                    if variant != variants[-1]:
                        continue
                    base = {r.bs: r.value for r in series.get((variants[0], mode, k), [])}
                    pts = [(r.bs, r.value / base[r.bs]) for r in rs if base.get(r.bs)]
                    if pts:
                        ax_ratio.plot(*zip(*pts), "-o", ms=3, color="black" if mode == "decode" else colors[k])
                ax_ratio.axhline(1.0, color="gray", lw=0.8)
                ax_ratio.set_ylabel(f"{variants[-1]} / {variants[0]}")
            _bs_axis(ax_ratio, sorted({r.bs for r in chosen}))
            ax.set_yscale("log")
            ax.set_ylabel("ms per step (median, log scale)")
            ax.set_title(f"{config} {backend} topk={topk}: filled = CUDA graph, hollow = eager, bar = rounds, "
                         "dotted = floor", fontsize=9)
            ax.legend(fontsize=7, ncol=2)
            ax_ratio.set_xlabel("batch size")
            written.append(_save(plt, fig, out_dir / f"step_{config}_{backend}_topk{topk}.png"))
    return written


def plot_e2e(plt, results: ResultSet, out_dir: Path) -> list[Path]:
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for r in results.records:
        if r.metric == "tokens_per_s":
            groups[(r.config, r.backend)].append(r)
    written = []
    variants = list(dict.fromkeys(r.variant for r in results.records))
    for (config, backend), records in sorted(groups.items()):
        fig, ax = plt.subplots(figsize=(8, 5))
        for (variant, mode, _k), rs in sorted(_series(records).items()):
            style = STYLES[variants.index(variant) % len(STYLES)]
            color = "tab:red" if mode == "e2e_spec" else "tab:blue"
            ax.plot([r.bs for r in rs], [r.value for r in rs], style + "o", color=color, ms=4,
                    label=f"{variant} {'spec on' if mode == 'e2e_spec' else 'spec off'}")
        _bs_axis(ax, sorted({r.bs for r in records}))
        ax.set_xlabel("batch size")
        ax.set_ylabel("output tokens/s")
        ax.set_title(f"end to end, {config} {backend}")
        ax.legend(fontsize=8)
        written.append(_save(plt, fig, out_dir / f"e2e_{config}_{backend}.png"))
    return written


def plot_results(path: Path) -> list[Path]:
    """Write every plot of ``path`` (a results.json or its folder) beside it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise BenchError(f"matplotlib is not importable ({exc}); plot on a machine that has it") from None
    results = ResultSet.load(path)
    out_dir = path if path.is_dir() else path.parent
    return plot_steps(plt, results, out_dir) + plot_e2e(plt, results, out_dir)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        written = plot_results(Path(args[0]))
    except BenchError as exc:
        print(f"plot.py: error: {exc}", file=sys.stderr)
        return 2
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

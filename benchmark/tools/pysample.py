"""Where the scheduler's wall time goes, from ``pysample_site`` samples: a pruned call tree.

Usage: python benchmark/pysample.py DIR [--min-pct 1.0] [--label spec-bs1] [--folded OUT]

DIR holds the ``samples-<pid>.json`` files that ``benchmark/worker/pysample_site/fastpath_pysample.py``
wrote from the scheduler processes (one per TP rank and engine). For each process and label it
prints the call tree of the main thread from the outermost frame down, every node with its share
of the sampled wall time (inclusive, then self), pruned below ``--min-pct``, and the frames with
the most self time. Time blocked in C (a CUDA sync, a socket poll, a kernel launch) counts to the
Python frame that called it. ``--folded`` also writes ``label;frame;frame... count`` lines, the
input of flame-graph tools.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Node:
    name: str
    total: int = 0
    own: int = 0
    children: dict[str, "Node"] = field(default_factory=dict)

    def add(self, stack: list[str], n: int) -> None:
        self.total += n
        node = self
        for name in stack:
            node = node.children.setdefault(name, Node(name))
            node.total += n
        node.own += n


@dataclass
class Profile:
    """The samples of one label in one scheduler process."""

    title: str
    label: str
    seconds: float
    root: Node
    host: dict[str, Any] | None = None  # the sampler's host facts of this label, with "affinity"


def load(folder: Path) -> list[Profile]:
    profiles: list[Profile] = []
    for path in sorted(folder.glob("samples-*.json")):
        body: dict[str, Any] = json.loads(path.read_text())
        roots: dict[str, Node] = {}
        for row in body["samples"]:
            roots.setdefault(row["label"], Node("all")).add(row["stack"], int(row["n"]))  # µs
        for label, root in sorted(roots.items()):
            title = f"{body.get('title', '')} pid {body['pid']}"
            host = body.get("host", {})
            facts = host.get("labels", {}).get(label)
            if facts is not None:
                facts = {**facts, "affinity": host.get("affinity", [])}
            profiles.append(Profile(title, label, float(body["seconds"].get(label, 0.0)), root, facts))
    return profiles


def _short(name: str) -> str:
    path, _, func = name.rpartition(":")
    return f"{func}  ({path.rpartition('/')[2]})"


def tree_lines(root: Node, min_pct: float) -> list[str]:
    lines: list[str] = []

    def walk(node: Node, depth: int) -> None:
        for child in sorted(node.children.values(), key=lambda c: -c.total):
            pct = 100.0 * child.total / root.total
            if pct < min_pct:
                continue
            own = 100.0 * child.own / root.total
            lines.append(f"{pct:6.1f}% {own:5.1f}%  {'  ' * depth}{_short(child.name)}")
            walk(child, depth + 1)

    walk(root, 0)
    return lines


def self_time(root: Node) -> Counter:
    out: Counter = Counter()

    def walk(node: Node) -> None:
        if node.own:
            out[node.name] += node.own
        for child in node.children.values():
            walk(child)

    walk(root)
    return out


def folded(profile: Profile) -> list[str]:
    lines: list[str] = []

    def walk(node: Node, prefix: list[str]) -> None:
        path = prefix + [node.name]
        if node.own:
            lines.append(f"{';'.join(path)} {node.own}")  # µs
        for child in node.children.values():
            walk(child, path)

    for child in profile.root.children.values():
        walk(child, [profile.label])
    return lines


def host_line(facts: dict[str, Any]) -> str:
    """One line of the process's host facts over a label's sampled spans."""
    wall = facts["wall_s"] or float("nan")
    looks = sum(c["looks"] for c in facts["cpus"].values()) or 1
    cpus = sorted(facts["cpus"].items(), key=lambda kv: -kv[1]["looks"])
    where = ", ".join(f"{cpu} ({100 * c['looks'] / looks:.0f}%)" for cpu, c in cpus[:4]) or "-"
    khz = max((c["khz_max"] for c in facts["cpus"].values()), default=0)
    clock = f" at up to {khz / 1e6:.2f} GHz" if khz else ""
    return (f"  host: {(facts['cpu_user_s'] + facts['cpu_sys_s']) / wall:.2f} CPU s per wall s "
            f"(user {facts['cpu_user_s'] / wall:.2f}, sys {facts['cpu_sys_s'] / wall:.2f}, all threads); "
            f"context switches {facts['ctx_voluntary']} voluntary, {facts['ctx_involuntary']} involuntary "
            f"in {facts['wall_s']:.2f} s; main thread on CPU {where}{clock}; "
            f"affinity {len(facts.get('affinity', []))} CPUs{gc_text(facts.get('gc') or {})}")


def gc_text(passes: dict[str, dict[str, float]]) -> str:
    """``; gc gen 0: 120 passes 3.1 ms, ...``: the collector's passes over the sampled spans, or nothing."""
    parts = [f"gen {gen}: {int(p['passes'])} passes {1e3 * p['s']:.1f} ms" for gen, p in sorted(passes.items())]
    return f"; gc {', '.join(parts)}" if parts else ""


def report(profile: Profile, min_pct: float, top: int = 15) -> str:
    head = [f"== {profile.label} | {profile.title} | {profile.seconds:.2f} s"]
    if profile.host is not None:
        head.append(host_line(profile.host))
    head.append("  total   self  frame (inclusive share of the sampled wall time, then self)")
    selfs = self_time(profile.root).most_common(top)
    tail = ["  top self time:"] + [f"{100.0 * n / profile.root.total:6.1f}%  {_short(name)}" for name, n in selfs]
    return "\n".join([*head, *tree_lines(profile.root, min_pct), *tail])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="folder with samples-<pid>.json files")
    parser.add_argument("--min-pct", type=float, default=1.0, help="prune tree nodes below this share")
    parser.add_argument("--label", help="only this label (e.g. spec-bs1)")
    parser.add_argument("--folded", type=Path, help="also write folded stacks here")
    args = parser.parse_args(argv)
    profiles = [p for p in load(args.folder) if args.label in (None, p.label)]
    if not profiles:
        parser.error(f"no samples in {args.folder}")
    for profile in profiles:
        print(report(profile, args.min_pct))
    if args.folded:
        args.folded.write_text("\n".join(line for p in profiles for line in folded(p)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

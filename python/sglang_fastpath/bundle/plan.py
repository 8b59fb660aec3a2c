"""Which distributions a bundle ships, given what the host already has.

A host *lacks* a distribution when it does not have it, or has it at a version outside a
specifier that a shipped distribution puts on it (sglang's ``transformers==5.12.1`` vs
the image's 5.17.0). ``full_plan`` walks pip's resolution from sglang and stops at what
the host satisfies; ``slim_plan`` takes a fixed set instead. Both then check every
requirement of every shipped distribution: met by the bundle, met by the host, unmet
(neither has it: expected for slim, which leaves out what an LLM server never imports),
or in conflict (a version is there, but the wrong one).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterator

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from sglang_fastpath.bundle.host_manifest import HostManifest
from sglang_fastpath.bundle.host_pip import Dist
from sglang_fastpath.bundle.profiles import TARGET_MARKERS

Specs = dict[str, set[str]]  # canonical name -> specifier strings put on it


@dataclass
class Plan:
    ship: dict[str, str]  # canonical name -> version shipped in the bundle
    on_host: dict[str, str] = field(default_factory=dict)  # required and left to the host: name -> its version
    unmet: dict[str, list[str]] = field(default_factory=dict)  # name -> "parent: requirement" lines
    conflicts: list[str] = field(default_factory=list)


def active_requirements(dist: Dist, extras: frozenset[str] | set[str] = frozenset()) -> Iterator[Requirement]:
    """``dist``'s requirements that apply on the host, with ``extras`` of it requested."""
    for text in dist.requires:
        req = Requirement(text)
        if req.marker is None or any(req.marker.evaluate({**TARGET_MARKERS, "extra": e}) for e in ("", *extras)):
            yield req


def _gather(ship: dict[str, set[str]], dists: dict[str, Dist]) -> Specs:
    specs: Specs = defaultdict(set)
    for name, extras in ship.items():
        for req in active_requirements(dists[name], extras):
            specs[canonicalize_name(req.name)].add(str(req.specifier))
    return dict(specs)


def _spec_sets(texts: set[str] | None) -> list[SpecifierSet]:
    return [SpecifierSet(t) for t in sorted(texts or ())]


def _walk(root: str, dists: dict[str, Dist], host: HostManifest, specs: Specs) -> dict[str, set[str]]:
    """Distributions reachable from ``root`` through ones the host does not satisfy, with extras."""
    ship: dict[str, set[str]] = {root: set()}
    queue = [root]
    while queue:
        name = queue.pop()
        for req in active_requirements(dists[name], ship[name]):
            child = canonicalize_name(req.name)
            if child not in dists or host.satisfies(child, _spec_sets(specs.get(child))):
                continue
            if child not in ship or not req.extras <= ship[child]:
                ship.setdefault(child, set()).update(req.extras)
                queue.append(child)
    return ship


def check(plan: Plan, dists: dict[str, Dist], host: HostManifest, extras: dict[str, set[str]] | None = None
          ) -> Plan:
    """Fill ``plan``'s on_host, unmet and conflicts from the requirements of what it ships."""
    for name in sorted(plan.ship):
        for req in active_requirements(dists[name], (extras or {}).get(name, set())):
            child = canonicalize_name(req.name)
            line = f"{name}: {req}"
            if child in plan.ship:
                if not req.specifier.contains(Version(plan.ship[child]), prereleases=True):
                    plan.conflicts.append(f"{line} but the bundle ships {child} {plan.ship[child]}")
            elif host.has(child):
                version = host.version(child)
                plan.on_host[child] = str(version) if version else "version unknown"
                if version is not None and not req.specifier.contains(version, prereleases=True):
                    plan.conflicts.append(f"{line} but the host has {child} {version}")
            else:
                plan.unmet.setdefault(child, []).append(line)
    return plan


def full_plan(root: str, dists: dict[str, Dist], host: HostManifest) -> Plan:
    """Everything pip resolved for ``root`` that the host lacks, found by walking from ``root``.

    The specifiers on a distribution come from every shipped one, and shipping more adds
    specifiers, so the walk is repeated until the shipped set stops growing.
    """
    specs: Specs = {}
    while True:
        ship = _walk(root, dists, host, specs)
        grown = _gather(ship, dists)
        if grown == specs:
            break
        specs = grown
    return check(Plan({n: dists[n].version for n in ship}), dists, host, ship)


def slim_plan(root: str, dists: dict[str, Dist], host: HostManifest) -> Plan:
    """``root`` and each of the fixed ``dists`` that the host lacks."""
    specs = _gather({n: set() for n in dists}, dists)
    ship = {n: d.version for n, d in dists.items()
            if n == root or not host.satisfies(n, _spec_sets(specs.get(n)))}
    return check(Plan(ship), dists, host)

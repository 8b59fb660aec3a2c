"""The verdict of ``run.py --selftest``: did every path produce its figure, on the path expected?

The selftest profile times bs 1 (inside the captured graphs, graph_max_bs 2) and bs 4
(past them: the natural eager fallback) for decode and verify at topk 1 and 4, the
same points with the graph runner removed, both e2e engines, and a TP=2 process when
two GPUs are there. Each check passes when its record exists with the expected graph
flag; a failing check prints the first error the worker wrote for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmark.driver.plan import Plan
from benchmark.driver.schema import STEP_MODES, ResultSet


@dataclass(frozen=True)
class Check:
    job: str
    label: str
    mode: str
    bs: int
    k: int
    topk: int
    metric: str
    graph: bool | None  # None: any


def checks_for(plan: Plan) -> list[Check]:
    checks: list[Check] = []
    for job in (j for j in plan.jobs if j.round == 1):  # a check per variant; any round may pass it
        if job.micro is not None:
            m = job.micro
            captured = set(m.graph_bs())
            for bs in m.bs:
                in_graph = bs in captured
                where = "graph" if in_graph else "eager fallback"
                checks.append(Check(job.series, f"decode {where} bs={bs}", "decode", bs, 1, 0, "latency_ms", in_graph))
                for topk in m.topks:
                    for k in m.ks:
                        checks.append(Check(job.series, f"verify {where} bs={bs} k={k} topk={topk}", "verify", bs, k,
                                            topk, "latency_ms", in_graph))
                if m.eager:
                    checks.append(Check(job.series, f"decode forced eager bs={bs}", "decode_eager", bs, 1, 0,
                                        "latency_ms", False))
                    checks += [Check(job.series, f"verify forced eager bs={bs} k={k} topk={t}", "verify_eager", bs,
                                     k, t, "latency_ms", False) for t in m.topks for k in m.ks]
        elif job.e2e is not None:
            e = job.e2e
            for bs in e.bs:
                checks.append(Check(job.series, f"e2e spec off bs={bs}", "e2e_nospec", bs, 0, 0, "tokens_per_s", None))
                checks.append(Check(job.series, f"e2e spec on bs={bs}", "e2e_spec", bs, e.draft_tokens, e.topk,
                                    "tokens_per_s", None))
                checks.append(Check(job.series, f"e2e accept length bs={bs}", "e2e_spec", bs, e.draft_tokens, e.topk,
                                    "accept_len", None))
    return checks


def verdict(plan: Plan, results: ResultSet) -> tuple[bool, str]:
    found = {}
    for r in results.records:
        job = f"{'micro' if r.mode in STEP_MODES else 'e2e'}-{r.variant}-{r.config}-{r.backend}"
        found[(job, r.mode, r.bs, r.k, r.topk, r.metric)] = r
    skipped = {p.get("series", p["job"]): p.get("note") for p in results.processes if p.get("status") == "skipped"}
    lines, ok = [], True
    for c in checks_for(plan):
        r = found.get((c.job, c.mode, c.bs, c.k, c.topk, c.metric))
        if r is not None and (c.graph is None or r.graph == c.graph) and r.value > 0:
            extra = f" = {r.value:.4g}" + (f", graph={r.graph}" if r.graph is not None else "")
            lines.append(f"  PASS  {c.job}: {c.label}{extra}")
            continue
        if r is None and c.job in skipped:
            lines.append(f"  SKIP  {c.job}: {c.label} ({skipped[c.job]})")
            continue
        ok = False
        if r is not None:
            why = f"graph={r.graph}, expected {c.graph}" if r.value > 0 else f"value {r.value}"
        else:
            why = _first_error(results, c) or "no record and no error: see the job's log"
        lines.append(f"  FAIL  {c.job}: {c.label}: {why}")
    head = "selftest: all paths ran as expected" if ok else "selftest: FAILED (first errors shown; logs/ has the rest)"
    return ok, "\n".join([head] + lines)


def _first_error(results: ResultSet, c: Check) -> str | None:
    """The most specific error of the check's job: its own point, else the job's first error."""
    own = [e for e in results.errors if e.get("series", e.get("job")) == c.job]
    point = f"{c.mode} bs={c.bs} k={c.k} topk={c.topk}"
    for e in own:
        if str(e.get("where", "")).startswith(point):
            return f"{e.get('where')}: {e.get('error')}"
    if own:
        return f"{own[0].get('where')}: {str(own[0].get('error')).splitlines()[-1] if own[0].get('error') else ''}"
    return None

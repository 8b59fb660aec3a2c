"""The plan of a run: which processes run which points, on which GPUs, for how long.

A job is one subprocess for one variant and one round: ``micro`` (one ModelRunner
timing decode and verify steps at every point) or ``e2e`` (sglang.Engine with
speculation off, then on). Jobs of one (kind, parallel config, backend) form a group
whose variants run alternately on the same GPU(s), round by round (stock r1, fork r1,
stock r2, fork r2, ...), so stock and fork are measured on the same chip, close in
time, each in several fresh processes. TP=1 groups share the GPUs in parallel lanes;
TP=2 groups then run alone. Times are estimates for the tiny models with a warm
Triton cache, scaled by ``calibration``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from benchmark.core.errors import BenchError
from benchmark.core.floor import ModelShape
from benchmark.core.spec import E2EPoints, MicroPoints

BACKENDS = ("default", "triton", "flashinfer")  # "default": SGLang's own choice for the GPU
KINDS = ("micro", "e2e")

# Seconds; see the module docstring. FIRST_COMPILE_S is paid once per fresh machine.
# Checked against the 2026-11-30 H200 baseline (dense-4): a TP=1 micro process 25 s
# (estimate 25), TP=2 57 s (NCCL's first collective alone took 9 s), the first process
# 27 s longer than the same job warm.
IMPORT_S = 12.0
RUNNER_INIT_S = {1: 10.0, 2: 40.0}  # TP>2: the TP=2 figure (not measured)
CAPTURE_SHAPE_S = 0.12
PREFILL_S = 0.4
# Prefill grows with the tokens and the model: about 20 us a token for kimi16's 43 GB at 8k context on an
# H200, taken as proportional to the weights (a rough order; the tiny models the constants above were checked on
# weigh nearly nothing). Weights load at about 1.8 GB/s (kimi16, 43.06 GB in 24.07 s, 2026-12-04).
PREFILL_TOKEN_GB_S = 5e-7
# Long prompts add attention over their own context, per prompt token per token of context per GB: kimi16 with
# 16k-token prompts (page 64, Triton, H200, 2026-12-05) prefilled its second 8k chunk at 2290 tok/s against 14,180
# for the first, 4.2 s a request in all, where the term above gives 0.35 s.
PREFILL_CONTEXT_GB_S = 3e-10
LOAD_GB_PER_S = 1.8
STEP_S = 0.004
ENGINE_START_S = {1: 35.0, 2: 50.0}
ENGINE_SPEC_EXTRA_S = 15.0
# --speculative-adaptive captures draft, draft-extend and verify graphs for each candidate step
# count besides the launch one: 6.2-10.4 s a state for dense-8 at TP 1 on an H200 (2026-12-01).
ADAPTIVE_STATES = 3
ADAPTIVE_STATE_S = 10.0
E2E_BATCH_S = 1.0  # plus output_len / 256 s per batch size and engine
# The first engine process on a host JIT-compiles the Triton kernels it uses. Dense pairs: 27 s (dense-4, H200,
# 2026-11-30). MLA + MoE pairs (kimi16, H200, 2026-12-04): the first process of a call took 93 s (micro, fresh host,
# after warm-jit) and 101 s (e2e, fresh host) longer than the same job's next one; 60 s and 40 s on a warm host whose
# earlier calls ran other kernels (e2e after micro).
FIRST_COMPILE_S = 40.0
FIRST_COMPILE_MLA_MOE_S = 100.0
PROFILE_WRITE_S = 8.0


@dataclass(frozen=True)
class Parallel:
    name: str
    tp: int
    custom_all_reduce: bool = True
    nccl_p2p: bool = True

    def env(self) -> dict[str, str]:
        return {} if self.nccl_p2p else {"NCCL_P2P_DISABLE": "1"}

    def server_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {"tp_size": self.tp}
        if not self.custom_all_reduce:
            args["disable_custom_all_reduce"] = True
        return args


# tp2-pcie: custom all-reduce and NCCL P2P off, so all-reduce costs resemble PCIe.
# tp4/tp8 (issue #6) run only where that many GPUs are found; elsewhere they are listed as not run.
PARALLEL = {p.name: p for p in (Parallel("tp1", 1), Parallel("tp2", 2), Parallel("tp2-pcie", 2, False, False),
                                Parallel("tp4", 4), Parallel("tp4-pcie", 4, False, False),
                                Parallel("tp8", 8), Parallel("tp8-pcie", 8, False, False))}


@dataclass(frozen=True)
class Variant:
    """One side of the comparison: a site folder holding sglang/, plus variables its processes get.

    Two variants may share a site and differ only in ``env``: e.g. the fork with and
    without a test switch (``--variant-env old:SGLANG_TEST_FORCE_PCG_FLAG_IN_VERIFY=1``).
    """

    name: str
    site: str
    env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> Variant:
        name, sep, site = text.partition("=")
        if not sep or not name or not site or not name.replace("-", "").replace("_", "").isalnum():
            raise BenchError(f"--variant {text!r}: write NAME=SITE_DIR, e.g. stock=/tmp/site-stock")
        return cls(name, site)

    def with_env(self, assignments: list[tuple[str, str]]) -> Variant:
        return replace(self, env=tuple(sorted({**dict(self.env), **dict(assignments)}.items())))


def parse_variant_env(texts: list[str], variants: list[Variant]) -> list[Variant]:
    """Apply ``--variant-env NAME:KEY=VALUE`` options to the variants they name."""
    extra: dict[str, list[tuple[str, str]]] = {}
    names = {v.name for v in variants}
    for text in texts:
        name, sep, assignment = text.partition(":")
        key, eq, value = assignment.partition("=")
        if not sep or not eq or not key or not key.replace("_", "").isalnum():
            raise BenchError(f"--variant-env {text!r}: write NAME:KEY=VALUE, e.g. old:SGLANG_FOO=1")
        if name not in names:
            raise BenchError(f"--variant-env {text!r}: no --variant named {name!r} (have {', '.join(sorted(names))})")
        extra.setdefault(name, []).append((key, value))
    return [v.with_env(extra.get(v.name, [])) for v in variants]


@dataclass(frozen=True)
class Job:
    kind: str
    variant: Variant
    parallel: Parallel
    backend: str
    models: str
    micro: MicroPoints | None = None
    e2e: E2EPoints | None = None
    server_args: tuple[tuple[str, Any], ...] = ()
    calibration: float = 1.0
    weights_gb: float = 0.0  # the target's and draft's checkpoint files, read at each process start
    round: int = 1  # 1-based; rounds of one group alternate between its variants
    rounds: int = 1

    @property
    def series(self) -> str:
        """The job's name without its round: what every round of this variant shares."""
        return f"{self.kind}-{self.variant.name}-{self.parallel.name}-{self.backend}"

    @property
    def name(self) -> str:
        return f"{self.series}-r{self.round}" if self.rounds > 1 else self.series

    @property
    def group(self) -> tuple[str, str, str]:
        return (self.kind, self.parallel.name, self.backend)

    def estimate_s(self) -> float:
        tp = self.parallel.tp
        if self.micro is not None:
            m = self.micro
            s = IMPORT_S + RUNNER_INIT_S.get(tp, RUNNER_INIT_S[2]) + len(m.graph_bs()) * m.runners * CAPTURE_SHAPE_S
            s += self.weights_gb / LOAD_GB_PER_S
            s += len(m.bs) * PREFILL_S + sum(m.bs) * (m.ctx + max(m.ks)) * self.weights_gb * PREFILL_TOKEN_GB_S
            s += m.points * (m.iters + m.warmup) * STEP_S
            if m.warmup_block and m.bs:
                s += PREFILL_S + m.points / len(m.bs) * (m.iters + m.warmup) * STEP_S
        else:
            e = self.e2e or E2EPoints()
            start = ENGINE_START_S.get(tp, ENGINE_START_S[2])
            generate_s = E2E_BATCH_S + e.output_len / 256  # one generate call, per batch size and engine
            s = IMPORT_S + 2 * (start + self.weights_gb / LOAD_GB_PER_S) + ENGINE_SPEC_EXTRA_S
            s += 2 * len(e.bs) * e.runs * generate_s
            s += 2 * len(e.bs) * e.warmup_tokens / 256  # the untimed call at each batch size
            # prefills of each engine: its warm-up at the largest bs; at each bs the untimed call, the timed runs,
            # the first-token calls of the decode rate, and a profiled or sampled call each
            calls = 1 + 2 * e.runs + (1 if e.profile_steps else 0) + e.pysample_runs
            s += 2 * (self.prefill_s(max(e.bs), e.prompt_len) + calls * sum(self.prefill_s(b, e.prompt_len) for b in e.bs))
            if dict(self.server_args).get("speculative_adaptive"):
                s += ADAPTIVE_STATES * ADAPTIVE_STATE_S
            if e.profile_steps:  # one more generate per batch size, and the ranks writing their traces
                s += 2 * len(e.bs) * (generate_s + PROFILE_WRITE_S)
            if e.pysample_runs:  # the sampled generate calls, and the sampler writing its counts
                s += 2 * len(e.bs) * (e.pysample_runs * generate_s + 3.0)
        return s * self.calibration

    def prefill_s(self, bs: int, prompt_len: int) -> float:
        """Seconds to prefill ``bs`` prompts of ``prompt_len`` tokens (rough, from the checkpoint's size)."""
        return bs * prompt_len * self.weights_gb * (PREFILL_TOKEN_GB_S + prompt_len * PREFILL_CONTEXT_GB_S)

    def spec(self) -> dict[str, Any]:
        """What the worker process reads (``benchmark.worker --spec``), as JSON; ``core.spec.JobSpec.from_spec`` reads it."""
        return {
            "kind": self.kind, "job": self.name, "variant": self.variant.name, "site": self.variant.site,
            "config": self.parallel.name, "tp": self.parallel.tp, "backend": self.backend,
            "models": self.models, "server_args": {**self.parallel.server_args(), **dict(self.server_args)},
            "micro": asdict(self.micro) if self.micro else None, "e2e": asdict(self.e2e) if self.e2e else None,
            "round": self.round, "rounds": self.rounds, "variant_env": dict(self.variant.env),
        }


# (kind, parallel, backend) in priority order: what runs first when the budget is short.
# The sweep is micro only: three rounds of fresh processes per variant cost three process
# start-ups (22 s at TP=1, 52 s at TP=2), so e2e (two engine start-ups per process),
# tp2 with custom all-reduce and the flashinfer backend moved to 'all'.
SWEEP = (("micro", "tp1", "triton"), ("micro", "tp2-pcie", "triton"), ("micro", "tp1", "default"))
EVERYTHING = SWEEP + (("e2e", "tp1", "triton"), ("micro", "tp2", "default"), ("micro", "tp1", "flashinfer"),
                      ("micro", "tp2-pcie", "flashinfer"), ("e2e", "tp2-pcie", "triton"), ("micro", "tp2", "triton"),
                      ("micro", "tp2", "flashinfer"), ("micro", "tp2-pcie", "default"), ("e2e", "tp2", "triton"),
                      *((kind, f"tp{n}{link}", "triton") for n in (8, 4) for link in ("-pcie", "")
                        for kind in ("micro", "e2e")))
QUICK = (("micro", "tp1", "triton"), ("micro", "tp2-pcie", "triton"), ("e2e", "tp1", "triton"))
SELFTEST = (("micro", "tp1", "triton"), ("e2e", "tp1", "triton"), ("micro", "tp2", "triton"))

PROFILES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "sweep": SWEEP, "all": EVERYTHING, "quick": QUICK, "selftest": SELFTEST}
# Sweep grid: bs 1, 8, 64 (one inside the small graphs, two past the usual eager
# threshold), k 2, 4, 8, topk 1 and 4; 10 timed runs per point (each round's median is
# what counts now, and three rounds give 30 runs).
SWEEP_MICRO = MicroPoints(bs=(1, 8, 64), ks=(2, 4, 8), topks=(1, 4), iters=10)
PROFILE_POINTS: dict[str, tuple[MicroPoints, E2EPoints]] = {
    "sweep": (SWEEP_MICRO, E2EPoints()),
    "all": (MicroPoints(), E2EPoints()),
    "quick": (MicroPoints(bs=(1, 8, 64), ks=(2, 4), topks=(1, 4), iters=8, warmup=2),
              E2EPoints(bs=(1, 16), output_len=64)),
    # bs 4 is past the captured graphs (graph_max_bs 2): the natural eager path.
    "selftest": (MicroPoints(bs=(1, 4), ks=(3,), topks=(1, 4), ctx=64, iters=3, warmup=1, eager=True,
                             graph_max_bs=2),
                 E2EPoints(bs=(2,), prompt_len=16, output_len=16)),
}
# Rounds per variant: (micro, e2e). One e2e process per variant already starts two engines.
PROFILE_REPEATS: dict[str, tuple[int, int]] = {"sweep": (3, 1), "all": (3, 1), "quick": (2, 1), "selftest": (1, 1)}


@dataclass
class Plan:
    profile: str
    gpus: int
    lanes: list[list[Job]]  # TP=1 groups, one list per GPU, run in parallel
    serial: list[Job]  # TP=2 groups, run after the lanes
    unrunnable: list[tuple[Job, str]] = field(default_factory=list)
    # Counted once in the wall estimate; the orchestrator adds it to the budget check of each GPU lane's first
    # process (and the TP=2 phase's) and to every process's timeout.
    first_compile_s: float = FIRST_COMPILE_S

    @property
    def jobs(self) -> list[Job]:
        return [j for lane in self.lanes for j in lane] + self.serial

    def estimate_wall_s(self) -> float:
        lanes = max((sum(j.estimate_s() for j in lane) for lane in self.lanes), default=0.0)
        return self.first_compile_s + lanes + sum(j.estimate_s() for j in self.serial)

    def describe(self) -> str:
        lines = [f"plan '{self.profile}': {len(self.jobs)} processes on {self.gpus} GPU(s), "
                 f"estimated {self.estimate_wall_s():.0f} s (incl. {self.first_compile_s:.0f} s first-run compile)"]
        for i, lane in enumerate(self.lanes):
            total = sum(j.estimate_s() for j in lane)
            lines.append(f"  lane GPU {i} (parallel, TP=1): {len(lane)} processes, ~{total:.0f} s")
            lines += [f"    {_job_line(j)}" for j in lane]
        if self.serial:
            total = sum(j.estimate_s() for j in self.serial)
            lines.append(f"  then on GPUs 0-1 (TP=2): {len(self.serial)} processes, ~{total:.0f} s")
            lines += [f"    {_job_line(j)}" for j in self.serial]
        lines += [f"  not run: {j.name}: {why}" for j, why in self.unrunnable]
        return "\n".join(lines)


def _job_line(job: Job) -> str:
    if job.round > 1:
        what = f"round {job.round} of {job.rounds}, same points"
    elif job.micro is not None:
        m = job.micro
        what = (f"{m.points} points: bs {list(m.bs)} x (decode + verify k {list(m.ks)} x topk {list(m.topks)})"
                f"{' x {graph, eager}' if m.eager else ''}, ctx {m.ctx}, {m.iters} iters"
                f"{', warm-up block first (discarded)' if m.warmup_block else ''}"
                f"{f', round 1 of {job.rounds}' if job.rounds > 1 else ''}")
    else:
        e = job.e2e or E2EPoints()
        acc = f"acc len {e.acc_len}" if e.acc_len > 0 else "real acceptance"
        what = (f"spec off/on ({acc}, k {e.draft_tokens}, topk {e.topk}) x bs {list(e.bs)}, "
                f"{e.output_len} new tokens{f', median of {e.runs} runs' if e.runs > 1 else ''}"
                f"{f', round 1 of {job.rounds}' if job.rounds > 1 else ''}")
    return f"{job.name:<42} ~{job.estimate_s():5.0f} s  {what}"


def build_plan(profile: str, variants: list[Variant], models: str, *, gpus: int,
               configs: list[str] | None = None, backends: list[str] | None = None,
               kinds: list[str] | None = None, micro: MicroPoints | None = None,
               e2e: E2EPoints | None = None, server_args: dict[str, Any] | None = None,
               calibration: float = 1.0, repeats: int | None = None, e2e_repeats: int | None = None,
               weights_gb: float = 0.0, first_compile_s: float = FIRST_COMPILE_S) -> Plan:
    if profile not in PROFILES:
        raise BenchError(f"profile {profile!r} is not one of {', '.join(PROFILES)}")
    if not variants:
        raise BenchError("no --variant given; pass e.g. --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork")
    if len({v.name for v in variants}) != len(variants):
        raise BenchError("two --variant share a name; give each a distinct NAME")
    for option, values, allowed in (("--configs", configs, PARALLEL), ("--backends", backends, BACKENDS),
                                    ("--kinds", kinds, KINDS)):
        bad = [v for v in values or [] if v not in allowed]
        if bad:
            raise BenchError(f"{option} {','.join(bad)}: choose from {', '.join(allowed)}")
    default_micro, default_e2e = PROFILE_POINTS[profile]
    rounds = {"micro": PROFILE_REPEATS[profile][0] if repeats is None else repeats,
              "e2e": PROFILE_REPEATS[profile][1] if e2e_repeats is None else e2e_repeats}
    if min(rounds.values()) < 1:
        raise BenchError(f"--repeats/--e2e-repeats {min(rounds.values())}: give at least 1 round")
    if e2e is not None and e2e.runs < 1:
        raise BenchError(f"--e2e-runs {e2e.runs}: give at least 1 timed run")
    groups = [g for g in PROFILES[profile] if (not kinds or g[0] in kinds)
              and (not configs or g[1] in configs) and (not backends or g[2] in backends)]
    if not groups:
        raise BenchError(f"the filters leave nothing of profile {profile!r}; profile 'all' has every combination")
    extra = tuple(sorted((server_args or {}).items()))
    plan = Plan(profile, gpus, [[] for _ in range(max(1, min(gpus, 8)))], [], first_compile_s=first_compile_s)
    loads = [0.0] * len(plan.lanes)
    for kind, config, backend in groups:
        parallel = PARALLEL[config]
        jobs = [Job(kind, v, parallel, backend, models,
                    micro=(micro or default_micro) if kind == "micro" else None,
                    e2e=(e2e or default_e2e) if kind == "e2e" else None,
                    server_args=extra, calibration=calibration, weights_gb=weights_gb, round=n,
                    rounds=rounds[kind])
                for n in range(1, rounds[kind] + 1) for v in variants]  # A B A B ...: interleaved rounds
        if parallel.tp > gpus:
            plan.unrunnable += [(j, f"needs {parallel.tp} GPUs, {gpus} found") for j in jobs]
        elif parallel.tp == 1:
            lane = loads.index(min(loads))
            plan.lanes[lane] += jobs
            loads[lane] += sum(j.estimate_s() for j in jobs)
        else:
            plan.serial += jobs
    plan.first_compile_s *= calibration
    return plan


def first_compile_for(shape: ModelShape | None) -> float:
    """The first process's Triton compile allowance for the target's architecture (see FIRST_COMPILE_MLA_MOE_S)."""
    return FIRST_COMPILE_MLA_MOE_S if shape is not None and (shape.mla or shape.moe) else FIRST_COMPILE_S


def with_points(points: Any, **changes: Any) -> Any:
    """``points`` (MicroPoints or E2EPoints) with the given fields replaced; None values are ignored."""
    return replace(points, **{k: v for k, v in changes.items() if v is not None})

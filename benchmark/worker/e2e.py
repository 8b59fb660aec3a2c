"""End-to-end output tokens/s of one variant: sglang.Engine with speculation off, then on.

Offline Engine (no HTTP, no tokenizer: token ids in, token ids out), attention backend
from the job, sampling backend pytorch, grammar backend none, radix cache off so no
batch reuses another's prefix. The spec-on engine runs EAGLE3 with the job's draft
under SGLANG_SIMULATE_ACC_LEN (acceptance forced to that length). For each batch size
every request gets ``prompt_len`` random tokens and generates exactly ``output_len``
(ignore_eos); tokens/s = generated tokens / wall time of the generate call, prefill
included, after one warm-up call at the largest batch and one untimed call at each batch size
just before it is timed, by default as long as the timed one (kernels specialised on a batch shape
compile there, not inside the first timed run: on kimi16 the first bs-1 run took 1.9 s against 0.77 s
for the second, and a spec engine's batch shrinks through shapes a short call never reaches); with
``runs`` > 1 the call is
timed that many times in the same engine and the median is reported (every run's
seconds kept in the record). ``acc_len`` 0 keeps the draft's real acceptance (an
oracle pair accepts everything). With the fork's all-reduce
telemetry on, each run's all-reduce counts per generated token are recorded; with its EAGLE
cycle telemetry on (``SGLANG_SPEC_CYCLE_STATS=1``), each spec-on batch size records
``verify_graph_hit``, ``cycle_ms`` and ``draft_tokens_mean`` (the mean K, its cycles per K in
the record's ``draft_tokens_mix``: what an adaptive policy chose) of its timed runs; with
``profile_steps``, a torch-profiler trace per batch size is taken after the timed runs
and summarized (``engine_probes``). With real acceptance (``acc_len`` 0) the job also checks
greedy parity: the spec-on engine's output token ids at each batch size must equal the
spec-off engine's (an ``output_digest`` line per engine and bs, then a ``greedy_parity``
line; a mismatch is an error of the job). Simulated acceptance changes the output by design,
so it is not checked then. With ``pysample_runs``, after the timed runs each batch size is
run that many more times with a sampling profiler of the scheduler loop on
(``pysample_site``), its samples in ``<job>-pysample/`` (read by ``benchmark/pysample.py``).
With ``FASTPATH_BENCH_FREEZE_GC=1`` in the job's environment (``--variant-env NAME:FASTPATH_BENCH_FREEZE_GC=1``)
each engine calls ``Engine.freeze_gc()`` after its first warm-up, before any timed run.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any, Callable

from benchmark.core.floor import ModelShape
from benchmark.core.spec import E2EPoints, JobSpec
from benchmark.worker import engine_probes
from benchmark.worker.sink import Sink
from benchmark.worker.tokens import token_ids
from sglang_fastpath.models.folder import ModelsFolder

SEED = 4321
FREEZE_GC_VAR = "FASTPATH_BENCH_FREEZE_GC"  # "1": each engine freezes the collector after its first warm-up


class EngineFailed(RuntimeError):
    """A SGLang subprocess of the engine died (it sends SIGQUIT to this process)."""


def on_child_failure(signum: int, frame: Any) -> None:
    """SIGQUIT handler: fail this engine, not the whole job (SGLang's default kills the process tree)."""
    raise EngineFailed("a SGLang subprocess of the engine failed (SIGQUIT); its traceback is in this job's log")


def _points(spec: JobSpec) -> E2EPoints:
    if spec.e2e is None:
        raise ValueError(f"job {spec.job!r} is e2e but its spec has no e2e points")
    return spec.e2e


def engine_kwargs(spec: JobSpec, speculative: bool) -> dict[str, Any]:
    e = _points(spec)
    pair = ModelsFolder(spec.models)
    bs_max = max(e.bs)
    kwargs: dict[str, Any] = dict(
        model_path=str(pair.target),
        tokenizer_path=str(pair.target),
        skip_tokenizer_init=True,
        attention_backend=None if spec.backend == "default" else spec.backend,
        sampling_backend="pytorch",
        grammar_backend="none",
        context_length=e.prompt_len + e.output_len + 64,
        max_running_requests=bs_max,
        disable_prefill_cuda_graph=True,
        disable_radix_cache=True,
        random_seed=0,
        log_level="info",
        custom_sigquit_handler=on_child_failure,
    )
    if speculative:
        kwargs.update(speculative_algorithm="EAGLE3",
                      speculative_draft_model_path=str(pair.draft),
                      speculative_num_steps=e.steps, speculative_eagle_topk=e.topk,
                      speculative_num_draft_tokens=e.draft_tokens)
    kwargs.update(spec.server_args)
    return kwargs


def _generate(engine: Any, prompts: list[list[int]], output_len: int) -> tuple[float, list[dict[str, Any]]]:
    params = {"temperature": 0.0, "max_new_tokens": output_len, "ignore_eos": True}
    start = time.perf_counter()
    outputs = engine.generate(input_ids=prompts, sampling_params=params)
    return time.perf_counter() - start, outputs


MIN_DECODE_SHARE = 0.25  # of a full call's time, for a decode rate to be recorded


def decode_rate(engine: Any, prompts: list[list[int]], runs: int, seconds: float,
                tokens: int) -> tuple[float | None, float] | None:
    """Output tokens per second after the first, and the first token's time: ``runs`` calls of one new
    token each (the prefill, and with EAGLE-3 the draft's) timed, their median taken off a full call's
    ``seconds``. The GPU-bound ratio from traces counts decode steps only; so does this rate. None for a call of
    one new token a request; the rate None (the first token's time kept, for the log) when the decode takes less
    than ``MIN_DECODE_SHARE`` of the full call: the difference of two separately timed calls is then mostly their
    noise (session 39, bs 96 at 64 new tokens: a 0.187-s first token of a 0.192-s call gave 1.28 M tok/s)."""
    decoded = tokens - len(prompts)
    if decoded <= 0:
        return None
    prefill_s = statistics.median(_generate(engine, prompts, 1)[0] for _ in range(runs))
    if seconds - prefill_s < MIN_DECODE_SHARE * seconds:
        return None, prefill_s
    return decoded / (seconds - prefill_s), prefill_s


class ParityMismatch(AssertionError):
    """EAGLE-3 changed the greedy output of some batch size."""


def output_digest(outputs: list[dict[str, Any]]) -> str:
    """sha256 of every request's output token ids, in request order."""
    ids = [list(map(int, o.get("output_ids") or [])) for o in outputs]
    return hashlib.sha256(json.dumps(ids).encode()).hexdigest()


def check_parity(digests: dict[bool, dict[int, str]], sink: Sink) -> int:
    """Compare spec-on against spec-off digests per batch size; 1 if any differs."""
    off, on = digests.get(False, {}), digests.get(True, {})
    both = sorted(set(off) & set(on))
    same = {bs: off[bs] == on[bs] for bs in both}
    sink.info("greedy_parity", {"bs": both, "equal": [same[bs] for bs in both]})
    bad = [bs for bs in both if not same[bs]]
    if bad:
        sink.error("greedy parity", ParityMismatch(f"EAGLE-3 changed the greedy output at bs {bad}"))
        return 1
    return 0


def run_engine(spec: JobSpec, sink: Sink, speculative: bool, trace_dir: Path) -> dict[int, str]:
    """Time one engine over the job's batch sizes; the output digest of each batch size."""
    import sglang

    e = _points(spec)
    mode = "e2e_spec" if speculative else "e2e_nospec"
    k, topk = (e.draft_tokens, e.topk) if speculative else (0, 0)
    kwargs = engine_kwargs(spec, speculative)
    sink.info("engine", {"mode": mode, "kwargs": kwargs})
    vocab = ModelShape.from_dir(ModelsFolder(spec.models).target).vocab
    prompts = token_ids(max(e.bs), e.prompt_len, vocab, SEED)
    start = time.perf_counter()
    engine = sglang.Engine(**kwargs)
    startup_s = time.perf_counter() - start
    digests: dict[int, str] = {}
    try:
        _generate(engine, prompts, min(16, e.output_len))  # warm-up: graphs, allocator
        if os.environ.get(FREEZE_GC_VAR) == "1":
            # Every object alive after start-up and the warm-up leaves the cyclic collector's passes (SGLang's
            # Engine.freeze_gc, in the scheduler processes too): a variant against the same engine without it.
            engine.freeze_gc()
            sink.info("freeze_gc", {"mode": mode})
        for bs in e.bs:
            try:
                # warm-up at this batch shape; a long one lets --speculative-adaptive settle before the timing
                _generate(engine, prompts[:bs], e.warmup_tokens)
                before = engine_probes.all_reduce_counts(engine)
                cycles_before = engine_probes.rank0_state(engine, "spec_cycle")
                runs = [_generate(engine, prompts[:bs], e.output_len) for _ in range(e.runs)]
                outputs = runs[-1][1]
                digests[bs] = output_digest(outputs)
                sink.info("output_digest", {"mode": mode, "bs": bs, "sha256": digests[bs]})
                tokens = sum(int(o["meta_info"]["completion_tokens"]) for o in outputs)
                seconds = statistics.median(s for s, _ in runs)
                extra = {"seconds": round(seconds, 4), "tokens": tokens, "startup_s": round(startup_s, 1),
                         "prompt_len": e.prompt_len, "output_len": e.output_len,
                         "runs_seconds": [round(s, 4) for s, _ in runs]}
                sink.record(mode=mode, bs=bs, k=k, topk=topk, metric="tokens_per_s", value=tokens / seconds,
                            n=len(runs), extra=extra)
                delta = engine_probes.count_delta(before, engine_probes.all_reduce_counts(engine))
                if delta is not None:
                    sink.info("all_reduce_counts", {"mode": mode, "bs": bs, "tokens": tokens * len(runs),
                                                    "rows": engine_probes.delta_rows(delta, tokens * len(runs))})
                accepts = [o["meta_info"].get("spec_accept_length") for o in outputs]
                accepts = [float(a) for a in accepts if a is not None]
                if speculative and accepts:
                    sink.record(mode=mode, bs=bs, k=k, topk=topk, metric="accept_len",
                                value=sum(accepts) / len(accepts), n=len(accepts), extra=extra)
                cycles_after = engine_probes.rank0_state(engine, "spec_cycle")
                cycles = engine_probes.cycle_metrics(cycles_before, cycles_after)
                mix = {"draft_tokens_mix": engine_probes.draft_token_mix(cycles_before, cycles_after)}
                per_metric = {"draft_tokens_mean": mix, "cycle_ms": engine_probes.phase_ms(cycles_before, cycles_after)}
                for metric, (value, steps) in cycles.items():
                    sink.record(mode=mode, bs=bs, k=k, topk=topk, metric=metric, value=value, n=steps,
                                extra={**extra, **per_metric.get(metric, {})})
                decode = decode_rate(engine, prompts[:bs], e.runs, seconds, tokens)
                if decode is not None and decode[0] is not None:
                    sink.record(mode=mode, bs=bs, k=k, topk=topk, metric="decode_tokens_per_s", value=decode[0],
                                n=e.runs, extra={**extra, "prefill_s": round(decode[1], 4)})
                elif decode is not None:  # why the record has no decode rate (session 41: a 16k prefill, 88%)
                    sink.info("decode_rate_skipped", {
                        "mode": mode, "bs": bs, "seconds": round(seconds, 4), "prefill_s": round(decode[1], 4),
                        "decode_share": round(1 - decode[1] / seconds, 3), "min_share": MIN_DECODE_SHARE})
            except Exception as exc:  # noqa: BLE001 - the other batch sizes still run
                sink.error(f"{mode} bs={bs} k={k} topk={topk}", exc)
        for bs in e.bs if e.pysample_runs else ():
            try:
                sampled_runs(engine, lambda: _generate(engine, prompts[:bs], e.output_len),
                             f"{mode}-bs{bs}", e.pysample_runs)
            except Exception as exc:  # noqa: BLE001 - a failed sample leaves the timings standing
                sink.error(f"{mode} bs={bs} pysample", exc)
        for bs in e.bs if e.profile_steps else ():
            try:
                folder = trace_dir / f"{mode}-bs{bs}"
                summary = engine_probes.profile_run(
                    engine, lambda: _generate(engine, prompts[:bs], e.output_len), folder, e.profile_steps)
                sink.info("trace_summary", {"mode": mode, "bs": bs, "steps": e.profile_steps,
                                            "folder": str(folder), "traces": summary})
                for metric, (value, cycles) in engine_probes.cycle_figures(folder).items():
                    sink.record(mode=mode, bs=bs, k=k, topk=topk, metric=metric, value=value, n=cycles,
                                extra={"profiled_steps": e.profile_steps})
            except Exception as exc:  # noqa: BLE001 - a failed trace leaves the timings standing
                sink.error(f"{mode} bs={bs} profile", exc)
    finally:
        engine.shutdown()
    return digests


PYSAMPLE_SITE = Path(__file__).resolve().parent / "pysample_site"


def enable_pysample(folder: Path) -> None:
    """Make the engines started from now on sample their scheduler loop into ``folder``.

    The scheduler processes are new interpreters: ``pysample_site`` on their PYTHONPATH
    starts the sampler (``fastpath_pysample``) before SGLang is imported.
    """
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["FASTPATH_PYSAMPLE_DIR"] = str(folder)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PYSAMPLE_SITE), os.environ.get("PYTHONPATH")]))


def sampled_runs(engine: Any, run: Callable[[], Any], label: str, runs: int) -> None:
    """``run()`` ``runs`` times with the scheduler sampler on under ``label``."""
    switch = Path(os.environ["FASTPATH_PYSAMPLE_DIR"]) / "on"
    switch.write_text(label)
    time.sleep(0.2)  # the sampler looks for the switch every 50 ms
    try:
        for _ in range(runs):
            run()
    finally:
        switch.unlink()
        time.sleep(2.5)  # the sampler writes its counts every 2 s


def run_job(spec: JobSpec, sink: Sink, out: str) -> int:
    e = _points(spec)
    if e.pysample_runs:
        enable_pysample(Path(str(Path(out).with_suffix("")) + "-pysample"))
    if e.acc_len > 0:  # read by the spawned scheduler; 0 keeps the draft's real acceptance
        os.environ["SGLANG_SIMULATE_ACC_LEN"] = str(e.acc_len)
    trace_dir = Path(str(Path(out).with_suffix("")) + "-traces")
    failed = 0
    digests: dict[bool, dict[int, str]] = {}
    for speculative in (False, True):
        try:
            digests[speculative] = run_engine(spec, sink, speculative, trace_dir)
        except Exception as exc:  # noqa: BLE001 - spec on still runs when spec off failed
            sink.error(f"{'e2e_spec' if speculative else 'e2e_nospec'} engine", exc)
            failed = 1
            from sglang.srt.utils import kill_process_tree

            kill_process_tree(os.getpid(), include_parent=False)  # what the failed engine left running
    if e.acc_len == 0 and len(digests) == 2:
        failed |= check_parity(digests, sink)
    return failed

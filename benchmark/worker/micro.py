"""Per-step micro-benchmark of one variant: decode and verify latency at every (bs, k, topk).

One process per (variant, parallel config, attention backend, round): the ModelRunner
is built once, the way ``sglang.benchmark.one_batch`` builds it (``load_model``), with
EAGLE3 on so the target's verify path is the serving one; TP ranks are spawned like
SGLang's own scheduler processes. For every batch size the process prefills once and
then times the decode runner and each verify runner (see runner_states and
step_inputs), recording whether the step replayed a CUDA graph
(``ModelRunnerOutput.can_run_graph``). Before the first timed point it runs a warm-up
block (the first batch size, every runner) whose records are marked ``warmup`` and
dropped by the collector. Rank 0 writes the records. With the fork's all-reduce telemetry
on (``SGLANG_ALL_REDUCE_STATS=1``), each point's all-reduces per step (mode, source,
placement, method, size) go into an ``all_reduce_counts`` line beside its timing.
"""

from __future__ import annotations

import multiprocessing
import os
from typing import Any

from sglang.benchmark import one_batch as ob

from benchmark.core.spec import JobSpec, MicroPoints
from benchmark.worker import engine_probes
from benchmark.worker.runner_states import RunnerState, build_states, steps_for
from benchmark.worker.sink import Sink
from benchmark.worker.step_inputs import DecodeStep, VerifyStep, prefill
from benchmark.worker.timing import time_step
from sglang_fastpath.models.folder import ModelsFolder

SEED = 1234
CONTEXT_SLACK = 64  # context_length beyond ctx + max k


def _points(spec: JobSpec) -> MicroPoints:
    if spec.micro is None:
        raise ValueError(f"job {spec.job!r} is micro but its spec has no micro points")
    return spec.micro


def server_kwargs(spec: JobSpec) -> dict[str, Any]:
    """ServerArgs of the ModelRunner: EAGLE3 at the largest k, graphs at the measured batch sizes."""
    m = _points(spec)
    pair = ModelsFolder(spec.models)
    k_max, topk = max(m.ks), m.topks[0]
    bs_max = max(m.bs)
    context_length = m.ctx + k_max + CONTEXT_SLACK
    graph_bs = m.graph_bs()
    kwargs: dict[str, Any] = dict(
        model_path=str(pair.target),
        tokenizer_path=str(pair.target),
        speculative_algorithm="EAGLE3",
        speculative_draft_model_path=str(pair.draft),
        speculative_num_steps=steps_for(k_max, topk),
        speculative_eagle_topk=topk,
        speculative_num_draft_tokens=k_max,
        attention_backend=None if spec.backend == "default" else spec.backend,
        sampling_backend="pytorch",
        grammar_backend="none",
        context_length=context_length,
        max_running_requests=bs_max,
        max_total_tokens=bs_max * context_length + 4096,
        disable_prefill_cuda_graph=True,
        disable_radix_cache=True,
        random_seed=0,
        log_level="info",
    )
    if graph_bs:
        kwargs["cuda_graph_bs_decode"] = graph_bs
    else:
        kwargs["disable_decode_cuda_graph"] = True
    kwargs.update(spec.server_args)
    return kwargs


def _emit(sink: Sink, timing: Any, *, mode: str, bs: int, k: int, topk: int, ctx: int,
          state: RunnerState, warmup: bool) -> None:
    extra = {"runner": state.origin, "graph_max_bs": max(state.graph_bs, default=0),
             "graphs_seen": sorted(set(timing.graphs))}
    marks = {"warmup": True} if warmup else {}
    for metric, samples in (("latency_ms", timing.latency_ms), ("wall_ms", timing.wall_ms)):
        sink.record(mode=mode, bs=bs, k=k, topk=topk, metric=metric, graph=timing.graph, n=len(samples),
                    ctx=ctx, extra=extra, **marks, **timing.stats(samples))


def _emit_counts(sink: Sink, before: dict | None, *, mode: str, bs: int, k: int, topk: int, steps: int,
                 warmup: bool) -> None:
    """This rank's all-reduces over one point's steps (the fork's telemetry, when on), per step."""
    delta = engine_probes.count_delta(before, engine_probes.local_all_reduce_counts())
    if delta is not None:
        sink.info("all_reduce_counts", {"mode": mode, "bs": bs, "k": k, "topk": topk, "steps": steps,
                                        "warmup": warmup, "rows": engine_probes.delta_rows(delta, steps, "per_step")})


def _measure(mr: Any, sink: Sink, state: RunnerState, step: Any, *, mode: str, bs: int, ctx: int,
             m: MicroPoints, warmup: bool) -> None:
    state.activate(mr)
    k, topk = (1, 0) if mode == "decode" else (state.k, state.topk)
    variants = [(mode, state.graph_runner)] + ([(mode + "_eager", None)] if m.eager else [])
    for name, runner in variants:
        mr.decode_cuda_graph_runner = runner
        try:
            before = engine_probes.local_all_reduce_counts()
            timing = time_step(step.run, reset=step.reset, warmup=m.warmup, iters=m.iters)
            _emit(sink, timing, mode=name, bs=bs, k=k, topk=topk, ctx=ctx, state=state, warmup=warmup)
            _emit_counts(sink, before, mode=name, bs=bs, k=k, topk=topk, steps=m.warmup + m.iters,
                         warmup=warmup)
        except Exception as exc:  # noqa: BLE001 - one point failing must not stop the sweep
            sink.error(f"{'warm-up ' if warmup else ''}{name} bs={bs} k={k} topk={topk}", exc)
    mr.decode_cuda_graph_runner = state.graph_runner


def run_rank(spec: JobSpec, server_args: Any, port_args: Any, rank: int, out: str | None) -> None:
    sink = Sink(out if rank == 0 else None)
    m = _points(spec)
    ob.initialize_moe_config(server_args)
    ob.initialize_fp8_gemm_config(server_args)
    ob.initialize_fp4_gemm_config(server_args)
    ob.configure_logger(server_args, prefix=f" TP{rank}")
    bench_runner, _tokenizer = ob.load_model(server_args, port_args, rank, rank)
    mr = bench_runner.torch_runner
    init, states = build_states(mr, ks=list(m.ks), topks=list(m.topks),
                                capture=mr.decode_cuda_graph_runner is not None, on_error=sink.error)
    sink.info("runners", {"attention_backend": getattr(mr, "decode_attention_backend_str", None),
                          "max_total_num_tokens": mr.max_total_num_tokens,
                          "states": [s.describe() for s in states]})
    vocab = mr.model_config.vocab_size
    for bs, warmup in m.blocks():
        tag = "warm-up " if warmup else ""
        init.activate(mr)
        try:
            pre = prefill(bench_runner, bs=bs, ctx=m.ctx, spare=max(m.ks), vocab=vocab, seed=SEED + bs)
        except Exception as exc:  # noqa: BLE001
            sink.error(f"{tag}prefill bs={bs}", exc)
            continue
        for state in states:
            try:
                step = (DecodeStep(mr, pre) if state.mode == "decode"
                        else VerifyStep(mr, pre, k=state.k, topk=state.topk))
            except Exception as exc:  # noqa: BLE001
                sink.error(f"{tag}{state.mode} bs={bs} k={state.k} topk={state.topk} (inputs)", exc)
                continue
            _measure(mr, sink, state, step, mode=state.mode, bs=bs, ctx=m.ctx, m=m, warmup=warmup)
    init.activate(mr)


def _rank_main(spec: JobSpec, server_args: Any, port_args: Any, rank: int, out: str | None) -> None:
    code = 0
    try:
        run_rank(spec, server_args, port_args, rank, out)
    except BaseException as exc:  # noqa: BLE001 - the parent reads the exit status
        Sink(out if rank == 0 else None).error(f"rank {rank}", exc)
        code = 1
    os._exit(code)  # skip teardown: a rank waiting on its peer must not hang the job


def run_job(spec: JobSpec, sink: Sink, out: str) -> int:
    server_args = ob.ServerArgs(**server_kwargs(spec))
    ob._set_envs_and_config(server_args)
    port_args = ob.PortArgs.init_new(server_args)
    sink.info("server_args", {"kwargs": server_kwargs(spec)})
    tp = spec.tp
    if tp == 1:
        run_rank(spec, server_args, port_args, 0, out)
        return 0
    context = multiprocessing.get_context("spawn")  # as SGLang starts its scheduler processes
    ranks = [context.Process(target=_rank_main, args=(spec, server_args, port_args, r, out)) for r in range(tp)]
    for p in ranks:
        p.start()
    while any(p.is_alive() for p in ranks):
        for p in ranks:
            p.join(timeout=1.0)
        if any(p.exitcode not in (None, 0) for p in ranks):
            for p in ranks:
                if p.is_alive():
                    p.terminate()  # its peer failed: it would wait on a collective forever
    codes = [p.exitcode for p in ranks]
    if any(c != 0 for c in codes):
        sink.error("tp ranks", RuntimeError(f"rank exit codes {codes}"))
        return 1
    return 0

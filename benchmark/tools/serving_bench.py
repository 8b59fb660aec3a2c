"""SGLang's own serving benchmark against the real server, with and without EAGLE-3 (GPU host).

    python -m benchmark.tools.serving_bench --models DIR --out DIR [--concurrency 1,8,32]
        [--input-len 128] [--output-len 256] [--acc-len 3] [--seed 1] [--traffic 8,48]
        [--eagle3-args "--speculative-adaptive ..."] [-- EXTRA SERVER ARGS]

For each mode (no speculation, then EAGLE-3 with K 4, topk 1) it starts
``python -m sglang.launch_server`` from whatever SGLang is first on ``PYTHONPATH`` (the soak's
``LaunchedServer``: loopback, its own process group, a log file), then at each concurrency runs
SGLang's ``sglang.benchmark.serving --backend sglang --dataset-name random-ids`` (random token
ids drawn from ``--seed``: no download, the same prompts for both modes) with
``4 x concurrency`` prompts (at least 16) and ``--random-range-ratio 1`` (every prompt and output
exactly the given lengths), after ``concurrency`` warm-up requests sent at once (the benchmark's
``--warmup-requests``), so a server meets that batch size once before it is timed (session 24's
EAGLE-3 kimi16 server, warmed by one request, stalled 11 s once in its first concurrency-8 run; cause
not found; identical warm-up prompts finish together, so they need not reach every state a timed run does).
Before the first point each server gets a pre-warm run (``--prewarm-prompts`` prompts of another seed, 32
new tokens, at the largest concurrency; its own warm-up request repeats its first prompt, so a prefill
over a cached prefix runs too): session 27's EAGLE-3 server otherwise paid two first-use stalls (4 s,
then a 1.85 s TTFT) inside its timed concurrency-1 run. ``--acc-len`` sets ``SGLANG_SIMULATE_ACC_LEN`` for the EAGLE-3 server
(0: the draft's real acceptance). Writes ``serving.json`` (one record per mode and concurrency:
output tok/s, request throughput, median and p99 TTFT/ITL, accept length when the benchmark
reports one; the server's quiet spells, see ``--stall-dump-s``), the benchmark's JSONL and both server logs,
and prints a table last. Issue 11 asks
for this figure beside the offline Engine's (``benchmark/run.py --kinds e2e``).

``--traffic RATES`` adds, after the concurrency points, one point per rate with a moving batch size (issue 12: the
adaptive K choice under load that changes, switches included): ``--traffic-prompts`` requests arriving as a Poisson
process at RATE a second (the benchmark's ``--request-rate``; its ``--seed`` fixes the arrival times, so both modes
meet the same schedule), prompt and output lengths drawn between ``--traffic-range-ratio`` and 1 of
``--input-len`` / ``--output-len``, at most the largest ``--concurrency`` in flight. Such a point is paced by its
arrivals, so its table compares time per output token (TPOT) and end-to-end latency, not tok/s alone.
``--eagle3-args`` go to the EAGLE-3 server only (an adaptive config, say), after the fixed K 4 chain's arguments.

The benchmark client is one process per mode (``serving_client.py``, ``BenchClient``), started before the
server so that its import overlaps the server's start-up: it imports ``sglang.benchmark.serving`` once and runs
each point in-process through the module's ``cli_main``, its output in the point's own log (``bench-MODE-TAG.log``;
the import's in ``client-MODE.log``). A process per point spent 20-25 s importing SGLang before its first request,
about 3 minutes of GPU-host time a call of 8 points. As with a process per point, a client that dies inside a
point fails that point and the next point starts a new one, and a point that outlives ``--point-timeout-s`` kills
the client and ends the mode; a client whose import fails ends the mode.

SGLang's benchmark imports every dataset module, one of which needs Hugging Face ``datasets``
(absent from the offline GPU bundle). Where ``import datasets`` fails, the client (never the
server) runs with ``serving_stubs/`` first on its ``PYTHONPATH``, whose ``load_dataset`` raises a
clear error; ``serving.json`` records it as ``client_datasets_stub``. A failing point's last log
lines are printed (the client's own log's when its import fails).

A SIGTERM (``timeout``'s signal when a device call's budget runs out) kills the client and stops the
server's whole process group, and ``serving.json`` keeps every point finished before it, with the
interrupted mode's error; session 30's budget ended inside a server's start-up, and the server, left
running with 97 GiB of GPU memory, made every engine of the next call on that host fail.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from benchmark.soak.server import LaunchedServer, children_of, free_port
from benchmark.tools.stall_watch import StallWatch, with_stack_dumps
from sglang_fastpath.models.folder import ModelsFolder

SPEC_ARGS = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
             "--speculative-num-draft-tokens", "4"]
BASE_ARGS = ["--attention-backend", "triton", "--sampling-backend", "pytorch", "--grammar-backend", "none"]
STUBS = Path(__file__).resolve().parent / "serving_stubs"  # a stand-in ``datasets`` package for the client
CLIENT = "benchmark.tools.serving_client"  # the persistent benchmark client, one process per mode
REPO = Path(__file__).resolve().parents[2]
TAIL_LINES = 15


@dataclass(frozen=True)
class Point:
    mode: str  # "nospec" or "eagle3"
    concurrency: int
    prompts: int
    output_tokens_per_s: float | None = None
    request_throughput: float | None = None
    median_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    median_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    accept_length: float | None = None
    error: str | None = None
    # quiet spells of the server's log while the client ran, each with its stack dumps (StallWatch)
    stalls: list[dict] = field(default_factory=list)
    prewarm: bool = False  # the untimed pre-warm run (kept for its stalls and errors, not in the table)
    request_rate: float | None = None  # a --traffic point's Poisson arrival rate (requests a second)
    median_tpot_ms: float | None = None
    p99_tpot_ms: float | None = None
    median_e2e_ms: float | None = None


def prompts_for(concurrency: int) -> int:
    return max(16, 4 * concurrency)


PREWARM_OUTPUT_LEN = 32
PREWARM_SEED_OFFSET = 1000  # pre-warm prompts differ from every timed prompt


def bench_args(port: int, model: str, concurrency: int, input_len: int, output_len: int, seed: int,
               out_file: Path, prompts: int | None = None, request_rate: float | None = None,
               range_ratio: float = 1.0) -> list[str]:
    """One point's arguments of SGLang's benchmark (what follows ``-m sglang.benchmark.serving``), which
    ``BenchClient`` runs in-process: all requests at once (at most ``concurrency`` in flight), or arriving at
    ``request_rate`` a second."""
    rate = [] if request_rate is None else ["--request-rate", f"{request_rate:g}"]
    return ["--backend", "sglang", "--host", "127.0.0.1",
            "--port", str(port), "--model", model, "--tokenizer", model, "--dataset-name", "random-ids",
            "--random-input-len", str(input_len), "--random-output-len", str(output_len),
            "--random-range-ratio", f"{range_ratio:g}", "--num-prompts", str(prompts or prompts_for(concurrency)),
            "--max-concurrency", str(concurrency), *rate, "--seed", str(seed), "--disable-tqdm",
            "--warmup-requests", str(concurrency), "--output-file", str(out_file)]


@dataclass(frozen=True)
class Run:
    """One run of the benchmark against a server: a timed point, or the untimed pre-warm."""

    concurrency: int
    output_len: int
    seed: int
    prompts: int | None
    tag: str  # the run's files: serving-MODE-TAG.jsonl, bench-MODE-TAG.log
    request_rate: float | None = None
    range_ratio: float = 1.0


def runs_for(args: argparse.Namespace) -> list[Run]:
    """The pre-warm run (unless ``--prewarm-prompts 0``), a point per concurrency, then a point per traffic rate."""
    top = max(args.concurrency)
    runs = [Run(c, args.output_len, args.seed, None, f"c{c}") for c in args.concurrency]
    runs += [Run(top, args.output_len, args.seed, args.traffic_prompts, f"r{rate:g}", rate, args.traffic_range_ratio)
             for rate in args.traffic]
    if args.prewarm_prompts > 0:
        runs.insert(0, Run(top, PREWARM_OUTPUT_LEN, args.seed + PREWARM_SEED_OFFSET, args.prewarm_prompts, "prewarm"))
    return runs


def datasets_importable(env: dict[str, str]) -> bool:
    """Whether ``import datasets`` works for ``sys.executable`` under ``env`` (the client's environment)."""
    probe = subprocess.run([sys.executable, "-c", "import datasets"], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120)
    return probe.returncode == 0


def client_env(base: dict[str, str], stub: bool) -> dict[str, str]:
    """The benchmark client's environment: ``base``, with ``STUBS`` first on ``PYTHONPATH`` when ``stub``."""
    if not stub:
        return dict(base)
    path = os.pathsep.join(p for p in (str(STUBS), base.get("PYTHONPATH", "")) if p)
    return {**base, "PYTHONPATH": path}


def log_tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file ("" when it is missing)."""
    if not path.is_file():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _get(row: dict, *names: str) -> float | None:
    for name in names:
        if row.get(name) is not None:
            return float(row[name])
    return None


def read_point(mode: str, concurrency: int, out_file: Path) -> Point:
    """The last JSON line the benchmark appended to ``out_file`` (one line per run)."""
    lines = [line for line in out_file.read_text().splitlines() if line.strip()] if out_file.is_file() else []
    if not lines:
        return Point(mode, concurrency, prompts_for(concurrency), error="no result line")
    row = json.loads(lines[-1])
    return Point(mode, concurrency, int(row.get("completed", prompts_for(concurrency))),
                 _get(row, "output_throughput"), _get(row, "request_throughput"), _get(row, "median_ttft_ms"),
                 _get(row, "p99_ttft_ms"), _get(row, "median_itl_ms"), _get(row, "p99_itl_ms"),
                 _get(row, "accept_length", "avg_accept_length"), median_tpot_ms=_get(row, "median_tpot_ms"),
                 p99_tpot_ms=_get(row, "p99_tpot_ms"), median_e2e_ms=_get(row, "median_e2e_latency_ms"))


class ClientFailed(RuntimeError):
    """The benchmark client could not import SGLang's benchmark."""


class ClientExited(ClientFailed):
    """The benchmark client's process ended (a crash inside a point: that point's exit status)."""

    def __init__(self, returncode: int) -> None:
        super().__init__(f"the benchmark client exited with status {returncode}")
        self.returncode = returncode


class BenchClient:
    """One mode's benchmark client, ``python -m benchmark.tools.serving_client`` (``CLIENT``): a process that imports
    ``sglang.benchmark.serving`` once and runs each point in-process, answering one JSON line per point. Started
    again by the point after one that killed it or saw it die. Its stderr (the import's output) goes to ``log``."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log = with_repo_root(env), log
        self.proc: subprocess.Popen | None = None
        self.started = 0  # processes started so far
        self._ready = False
        self._buffer = b""

    @property
    def pid(self) -> int:
        assert self.proc is not None, "the client is not running"
        return self.proc.pid

    def start(self) -> None:
        """Start the process; its import runs while the caller goes on (``ready`` waits for it)."""
        with open(self.log, "a" if self.started else "w") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", CLIENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log, env=self.env, bufsize=0)
        self.started += 1
        self._ready, self._buffer = False, b""

    def ready(self, timeout_s: float) -> None:
        """Wait for the client's import (starting a process first when none runs); ``ClientFailed`` when it fails,
        ``subprocess.TimeoutExpired`` after ``timeout_s``, and no process left behind either way."""
        if self.proc is None:
            self.start()
        if self._ready:
            return
        try:
            doc = self._call(None, timeout_s)
            if not doc.get("ready"):
                raise ClientFailed(f"the benchmark client is not ready: {doc.get('error')}")
        except ClientFailed:
            self.close()
            print(f"the benchmark client failed; the last lines of {self.log.name}:\n{log_tail(self.log)}",
                  file=sys.stderr)
            raise
        self._ready = True

    def run(self, argv: list[str], log: Path, timeout_s: float) -> int:
        """One run of ``sglang.benchmark.serving`` with ``argv``, its output in ``log``: its exit status (the
        process's, when it died inside the run: the next run starts a new one, as a process per point would)."""
        try:
            return int(self._call({"argv": argv, "log": str(log)}, timeout_s)["rc"])
        except ClientExited as exc:
            return exc.returncode

    def close(self) -> None:
        """Kill the process (idle or not) and wait for it."""
        proc, self.proc, self._ready = self.proc, None, False
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass

    def _call(self, request: dict | None, timeout_s: float) -> dict:
        """Send ``request`` (none: only read) and read one answer; on any failure, a timeout or a signal's exception,
        the process is killed and waited for before it propagates."""
        try:
            if request is not None:
                self._send(request)
            return self._answer(timeout_s)
        except BaseException:
            self.close()
            raise

    def _send(self, request: dict) -> None:
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise ClientExited(self.proc.wait()) from None

    def _answer(self, timeout_s: float) -> dict:
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired([sys.executable, "-m", CLIENT], timeout_s)
            if not select.select([fd], [], [], left)[0]:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ClientExited(self.proc.wait())
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)


def with_repo_root(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this repository last on ``PYTHONPATH``, so ``CLIENT`` imports from any working directory."""
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**env, "PYTHONPATH": os.pathsep.join(parts if str(REPO) in parts else [*parts, str(REPO)])}


class Terminated(BaseException):
    """Raised by the SIGTERM handler: a BaseException, so run_mode's record-and-go-on handler lets it pass while
    its ``finally`` stops the server."""


def raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(f"terminated by signal {signum}")


def run_mode(mode: str, args: argparse.Namespace, out: Path, bench_env: dict[str, str],
             points: list[Point] | None = None) -> list[Point]:
    """Start ``mode``'s server and run each concurrency against it; the points, appended to ``points`` as each
    finishes (so a caller keeps them when a signal ends the mode)."""
    points = [] if points is None else points
    pair = ModelsFolder(Path(args.models))
    launch = ["--model-path", str(pair.target), *BASE_ARGS, *args.server_args]
    env = None
    if mode == "eagle3":
        launch += ["--speculative-draft-model-path", str(pair.draft), *SPEC_ARGS, *shlex.split(args.eagle3_args)]
        env = {"SGLANG_SIMULATE_ACC_LEN": str(args.acc_len)} if args.acc_len else None
    port = free_port()
    if args.stall_dump_s > 0:
        markers = Path(tempfile.mkdtemp(prefix=f"stack-dump-{mode}-"))
        env = with_stack_dumps({**os.environ, **(env or {})}, markers)
        bench_env = with_stack_dumps(bench_env, markers)
    server = LaunchedServer(launch, port, out / f"server-{mode}.log", env=env)
    client = BenchClient(bench_env, out / f"client-{mode}.log")
    watch = None
    try:
        client.start()  # its import of SGLang's benchmark runs while the server starts
        server.start(args.start_timeout_s)
        if args.stall_dump_s > 0:
            watch = StallWatch(server.log, server.proc.pid, markers, quiet_s=args.stall_dump_s)
            watch.start()
        for run in runs_for(args):
            out_file = out / f"serving-{mode}-{run.tag}.jsonl"
            argv = bench_args(port, str(pair.target), run.concurrency, args.input_len, run.output_len, run.seed,
                              out_file, run.prompts, run.request_rate, run.range_ratio)
            log_path = out / f"bench-{mode}-{run.tag}.log"
            returncode, stalls = run_client(client, argv, log_path, args.point_timeout_s, watch)
            point = replace(read_point(mode, run.concurrency, out_file), stalls=stalls,
                            prewarm=run.tag == "prewarm", request_rate=run.request_rate)
            if returncode != 0 and point.error is None:
                point = replace(point, error=f"benchmark exited {returncode}")
            if point.error:
                print(f"{mode} {run.tag}: {point.error}; the last lines of {log_path.name}:\n"
                      f"{log_tail(log_path)}", file=sys.stderr)
            points.append(point)
    except Exception as exc:  # noqa: BLE001 - record the failure, keep what was measured
        points.append(Point(mode, -1, 0, error=f"{type(exc).__name__}: {exc}"[:300]))
    finally:
        try:
            if watch is not None:
                watch.stop()
            client.close()
        finally:
            server.stop()
    return points


def run_client(client: BenchClient, argv: list[str], log_path: Path, timeout_s: float,
               watch: StallWatch | None) -> tuple[int, list[dict]]:
    """One point on ``client`` (its arguments of ``sglang.benchmark.serving``, output to ``log_path``) with ``watch``
    armed while it runs; its exit status and the stalls seen."""
    client.ready(timeout_s)
    first = len(watch.stalls) if watch else 0
    if watch:
        pid = client.pid
        watch.extra_pids = lambda: [pid, *children_of(pid)]
        watch.arm()
    try:
        returncode = client.run(argv, log_path, timeout_s)
    finally:
        if watch:
            watch.disarm()
    return returncode, [asdict(s) for s in (watch.stalls[first:] if watch else [])]


def table(points: list[Point]) -> str:
    """The concurrency points' table, then the traffic points' (when there are any)."""
    text = concurrency_table([p for p in points if p.request_rate is None])
    traffic = [p for p in points if p.request_rate is not None and not p.prewarm]
    return f"{text}\n\n{traffic_table(traffic)}" if traffic else text


def _fmt(value: float | None, scale: float = 1.0) -> str:
    return "-" if value is None else f"{value * scale:.1f}"


def traffic_table(points: list[Point]) -> str:
    by = {(p.mode, p.request_rate): p for p in points}
    rows = ["| requests/s | no spec tok/s | EAGLE-3 tok/s | TPOT p50 ms no spec / EAGLE-3 | TPOT p99 ms | "
            "TPOT p50 ratio | E2E p50 s | EAGLE-3 accept |", "|---|---|---|---|---|---|---|---|"]
    for rate in sorted({r for _, r in by}):
        a, b = by.get(("nospec", rate)), by.get(("eagle3", rate))
        get = lambda p, name: getattr(p, name) if p else None  # noqa: E731
        ta, tb = get(a, "median_tpot_ms"), get(b, "median_tpot_ms")
        ratio = f"{ta / tb:.2f}" if ta and tb else "-"
        rows.append(f"| {rate:g} | {_fmt(get(a, 'output_tokens_per_s'))} | {_fmt(get(b, 'output_tokens_per_s'))} | "
                    f"{_fmt(ta)} / {_fmt(tb)} | {_fmt(get(a, 'p99_tpot_ms'))} / {_fmt(get(b, 'p99_tpot_ms'))} | "
                    f"{ratio} | {_fmt(get(a, 'median_e2e_ms'), 1e-3)} / {_fmt(get(b, 'median_e2e_ms'), 1e-3)} | "
                    f"{_fmt(get(b, 'accept_length'))} |")
    return "\n".join(rows)


def concurrency_table(points: list[Point]) -> str:
    by = {(p.mode, p.concurrency): p for p in points if not p.prewarm}
    rows = ["| concurrency | no spec tok/s | EAGLE-3 tok/s | ratio | EAGLE-3 accept | ITL p50 ms no spec / EAGLE-3 |",
            "|---|---|---|---|---|---|"]
    for c in sorted({c for _, c in by if c > 0}):
        a, b = by.get(("nospec", c)), by.get(("eagle3", c))
        ta = a.output_tokens_per_s if a else None
        tb = b.output_tokens_per_s if b else None
        ratio = f"{tb / ta:.2f}" if ta and tb else "-"
        rows.append(f"| {c} | {_fmt(ta)} | {_fmt(tb)} | {ratio} | {_fmt(b.accept_length if b else None)} | "
                    f"{_fmt(a.median_itl_ms if a else None)} / {_fmt(b.median_itl_ms if b else None)} |")
    return "\n".join(rows)


MODES = ("nospec", "eagle3")


def modes(text: str) -> list[str]:
    """``--modes``: a comma list of MODES, each once."""
    names = [v for v in text.split(",") if v]
    if not names or len(set(names)) != len(names) or set(names) - set(MODES):
        raise argparse.ArgumentTypeError(f"{text!r}: a comma list of {', '.join(MODES)}, each once")
    return names


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ints = lambda s: [int(v) for v in s.split(",") if v]  # noqa: E731
    floats = lambda s: [float(v) for v in s.split(",") if v]  # noqa: E731
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", required=True, help="folder with target/ and draft/ (sglang-fastpath models)")
    p.add_argument("--out", required=True)
    p.add_argument("--concurrency", type=ints, default=[1, 8, 32])
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--acc-len", type=float, default=3.0, help="SGLANG_SIMULATE_ACC_LEN for EAGLE-3 (0: real)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--modes", type=modes, default=list(MODES),
                   help="the modes to run, in this order (a budget that ends early keeps the first): "
                        f"{','.join(MODES)}")
    p.add_argument("--traffic", type=floats, default=[],
                   help="request rates (a second) of points with Poisson arrivals and a moving batch size, after "
                        "the concurrency points; none by default")
    p.add_argument("--traffic-prompts", type=int, default=128, help="requests of each --traffic point")
    p.add_argument("--traffic-range-ratio", type=float, default=0.25,
                   help="a --traffic point's prompt and output lengths are drawn between this and 1 of "
                        "--input-len / --output-len")
    p.add_argument("--eagle3-args", default="",
                   help="launch_server arguments for the EAGLE-3 server only (one string, split as a shell would)")
    p.add_argument("--prewarm-prompts", type=int, default=32,
                   help="prompts of an untimed run (another seed, 32 new tokens, the largest concurrency) before "
                        "each server's first point, so first-use compiles fall outside the timed runs; 0: none")
    p.add_argument("--start-timeout-s", type=float, default=300.0)
    p.add_argument("--point-timeout-s", type=float, default=300.0)
    p.add_argument("--stall-dump-s", type=float, default=3.0,
                   help="while a client runs, dump every server and client process's Python stacks into its log "
                        "when the server log has been quiet this long (benchmark/tools/stall_watch.py); 0: off")
    p.add_argument("server_args", nargs="*", help="more launch_server arguments (after --)")
    return p.parse_args(argv)


def write_doc(out: Path, args: argparse.Namespace, t0: float, stub: bool, points: list[Point]) -> None:
    """``serving.json`` with the points so far (written after each mode, so a run cut short keeps them)."""
    doc = {"schema": "sglang-fastpath-serving/1", "args": vars(args), "seconds": round(time.time() - t0, 1),
           "client_datasets_stub": stub, "records": [asdict(p) for p in points]}
    (out / "serving.json").write_text(json.dumps(doc, indent=1))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    stub = not datasets_importable(dict(os.environ))
    bench_env = client_env(dict(os.environ), stub)
    points: list[Point] = []
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        for mode in args.modes:
            try:
                run_mode(mode, args, out, bench_env, points)
            except Terminated as exc:
                points.append(Point(mode, -1, 0, error=str(exc)))
                break
            finally:
                write_doc(out, args, t0, stub, points)
    finally:
        signal.signal(signal.SIGTERM, previous)
    for p in points:
        if p.error:
            print(f"{p.mode} c{p.concurrency}: {p.error}", file=sys.stderr)
    print(table(points))
    return 1 if any(p.error for p in points) else 0


if __name__ == "__main__":
    sys.exit(main())

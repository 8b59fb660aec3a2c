"""The Docker image's install path, tested where no Docker engine exists.

Fast, offline: hadolint and shellcheck on docker/, the .dockerignore allow-list, the
dependency locks against the fork wheel's requirements, install.py's choices, and the
HEALTHCHECK and entrypoint scripts.

Slow (``network``: about 3 GB from the package index, 9 GB on disk, 5-10 minutes): the install
half of ``demo.sh`` (the README's main job; no GPU here, so it stops after the install) into a
fresh venv of the image's Python 3.12 (3.11 and its lock where no 3.12 exists): it runs
``docker/build-wheels.sh`` (the ``wheels`` stage) and ``docker/install.sh --mode full`` exactly as
the Dockerfile's runtime stage runs them, from one download of the lock; a second ``demo.sh``
reuses the venv in seconds; ``--mode overlay`` over the pristine 0.5.17 wheel, as on the lmsysorg
base; and every server flag of the docs' ``docker run`` examples parsed by SGLang 0.5.17's own
argument parser.

The image (``network``, a Docker engine; about 5 minutes on 2 shared cores, see docs/docker.md): ``docker/Dockerfile``
built on a local Ubuntu 24.04 base made with debootstrap, its dependency lock installed from the
wheels the install above downloaded (no second download), then checked in the container: the
fork and its patches (``doctor``), SGLang's engine imports, ``launch_server --help``, a non-root
user, the HEALTHCHECK, no build CA left behind; its size and the step's time are printed. Where no
Docker daemon can start, these tests are skipped with the reason (test/docker_engine.py).
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pytest
from docker_engine import Build, Engine, Unavailable, build_image, host_extra_cas, make_bases, start_engine
from fastpath_fixtures import find_python
from packaging.markers import default_environment
from packaging.requirements import Requirement

from sglang_fastpath.errors import FastpathError
from sglang_fastpath.fetch import fetch_pinned
from sglang_fastpath.install.lock import PLATFORMS, canonical_name, lock_path, read_lock
from sglang_fastpath.install.target import Target
from sglang_fastpath.install.wheelhouse import Mode, check_mode, fatal_problems, find_wheelhouse, install
from sglang_fastpath.pins import BASE_VERSION, fastpath_version, python_tags
from sglang_fastpath.series.patches import read_series
from sglang_fastpath.wheel.archive import record_hash

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
# Every `docker run ... sglang-fastpath:TAG --flags` in these is parsed by SGLang's own parser.
DOCS = (REPO / "docs" / "docker.md", REPO / "README.md")
FORK = fastpath_version()


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if not found:
        pytest.fail(f"{name} is not installed: pip install -r test/requirements-cpu.txt")
    return found


def _run(cmd: list[str], timeout: float = 900, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)


# ---------------------------------------------------------------- lint


def test_dockerfile_passes_hadolint() -> None:
    env = {**os.environ, "PATH": f"{Path(_tool('shellcheck')).parent}:{os.environ['PATH']}"}
    proc = _run([_tool("hadolint"), "--no-color", str(DOCKER / "Dockerfile")], env=env)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def test_docker_scripts_pass_shellcheck() -> None:
    scripts = sorted(DOCKER.glob("*.sh"))
    assert {p.name for p in scripts} >= {"install.sh", "build-wheels.sh", "entrypoint.sh"}
    proc = _run([_tool("shellcheck"), *map(str, scripts)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerignore_admits_every_copy_source() -> None:
    allowed = {line[1:].strip().strip("/") for line in (REPO / ".dockerignore").read_text().splitlines()
               if line.startswith("!")}
    dockerfile = (DOCKER / "Dockerfile").read_text()
    sources = []
    for line in dockerfile.splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            sources += [w for w in words[1:-1] if not w.startswith("--")]
    assert sources, "no COPY from the build context found"
    # The runtime stage bind-mounts the context and runs docker/install.sh from python/.
    assert "source=.,target=/src" in dockerfile
    for source in [*sources, "docker/install.sh", "python/sglang_fastpath"]:
        assert source.split("/")[0] in allowed, f"{source} is excluded by .dockerignore"


# ---------------------------------------------------------------- locks


@pytest.mark.parametrize("tag", python_tags())
def test_lock_satisfies_the_wheels_requirements(tag: str) -> None:
    lock = read_lock(lock_path(DOCKER / "lock", tag))
    assert (lock.base_version, lock.python_tag) == (BASE_VERSION, tag)
    assert lock.find("sglang") is None and len({p.name for p in lock.pins}) == len(lock.pins)
    with zipfile.ZipFile(fetch_pinned(BASE_VERSION, tag)) as zf:
        metadata = zf.read(f"sglang-{BASE_VERSION}.dist-info/METADATA").decode()
    env = {**default_environment(), "python_version": f"{tag[2]}.{tag[3:]}", "python_full_version": f"{tag[2]}.{tag[3:]}.0",
           "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
           "implementation_name": "cpython", "extra": ""}
    checked = 0
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist: "):
            continue
        req = Requirement(line[len("Requires-Dist: "):])
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        pin = lock.find(req.name)
        assert pin is not None, f"{req} is not in the {tag} lock"
        assert req.specifier.contains(pin.version, prereleases=True), f"{req} vs locked {pin.version}"
        checked += 1
    assert checked > 50


# ---------------------------------------------------------------- install.py, offline


def _fake_wheel(folder: Path, name: str, version: str, tag: str, damaged: bool = False) -> Path:
    path = folder / f"{name}-{version}-{tag}-{tag}-manylinux_2_34_x86_64.whl"
    info = f"{name}-{version}.dist-info/"
    data = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(info + "METADATA", data)
        digest = "sha256=wrong" if damaged else record_hash(data)
        zf.writestr(info + "RECORD", f"{info}METADATA,{digest},{len(data)}\n{info}RECORD,,\n")
    return path


def test_wheelhouse_takes_the_interpreters_tag_and_the_forks_extras(tmp_path: Path) -> None:
    for tag in ("cp311", "cp312"):
        _fake_wheel(tmp_path, "sglang", FORK, tag)
    tooling = _fake_wheel(tmp_path, "sglang_fastpath", "0.1.0", "py3")
    _fake_wheel(tmp_path, "torch", "2.11.0", "cp312")
    house = find_wheelhouse(tmp_path, "cp312")
    assert "-cp312-" in house.sglang.name and house.version == FORK
    assert house.extras == (tooling,)


@pytest.mark.parametrize("case, message", [
    ("empty", "docker/build-wheels.sh"),
    ("pristine", "not a fork wheel"),
    ("damaged", "is damaged"),
    ("two releases", "keep only"),
])
def test_wheelhouse_refusals_name_the_fix(tmp_path: Path, case: str, message: str) -> None:
    if case == "pristine":
        _fake_wheel(tmp_path, "sglang", BASE_VERSION, "cp312")
    elif case == "damaged":
        _fake_wheel(tmp_path, "sglang", FORK, "cp312", damaged=True)
    elif case == "two releases":
        _fake_wheel(tmp_path, "sglang", FORK, "cp312")
        _fake_wheel(tmp_path, "sglang", fastpath_version(99), "cp312")
    with pytest.raises(FastpathError, match=message):
        find_wheelhouse(tmp_path, "cp312")


@pytest.mark.parametrize("mode, present, machine, refusal", [
    (Mode.FULL, None, "x86_64", None),
    (Mode.FULL, FORK, "x86_64", None),
    (Mode.FULL, BASE_VERSION, "x86_64", "--mode overlay"),
    (Mode.FULL, None, "aarch64", "x86_64"),
    (Mode.OVERLAY, BASE_VERSION, "aarch64", None),
    (Mode.OVERLAY, FORK, "x86_64", None),
    (Mode.OVERLAY, None, "x86_64", "--mode full"),
    (Mode.OVERLAY, "0.5.16", "x86_64", "built on 0.5.17"),
])
def test_mode_must_fit_the_environment(mode: Mode, present: str | None, machine: str, refusal: str | None) -> None:
    target = Target("/env/bin/python", "cp312", machine, present, False)
    if refusal is None:
        check_mode(mode, target)
    else:
        with pytest.raises(FastpathError, match=re.escape(refusal)):
            check_mode(mode, target)


def test_overlay_fails_only_on_the_forks_own_requirements() -> None:
    problems = [f"sglang {FORK} has requirement torch==2.11.0, but you have torch 2.9.0.",
                "vllm 0.9.0 has requirement torch==2.7.0, but you have torch 2.11.0.",
                "sglang-fastpath 0.1.0 requires pytest, which is not installed."]
    assert fatal_problems(problems, Mode.FULL) == problems
    assert fatal_problems(problems, Mode.OVERLAY) == [problems[0], problems[2]]


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh venv without sglang (and without pip: the refusals come before pip runs)."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


def test_install_sh_refuses_overlay_without_sglang(tmp_path: Path, bare_python: str) -> None:
    _fake_wheel(tmp_path, "sglang", FORK, "cp%d%d" % sys.version_info[:2])
    proc = _run(["bash", str(DOCKER / "install.sh"), "--mode", "overlay", "--python", bare_python, str(tmp_path)],
                env={**os.environ, "PYTHON": sys.executable})
    assert proc.returncode == 2 and "has no sglang to overlay: use --mode full" in proc.stderr, proc.stderr


def test_full_mode_needs_the_lock_of_its_tag(tmp_path: Path, bare_python: str) -> None:
    _fake_wheel(tmp_path, "sglang", FORK, "cp%d%d" % sys.version_info[:2])
    with pytest.raises(FastpathError, match="no dependency lock"):
        install(tmp_path, Mode.FULL, bare_python, tmp_path / "no-locks")


@pytest.mark.parametrize("entry", [["-m", "sglang_fastpath", "install"], ["-m", "sglang_fastpath.install"]])
def test_the_install_verb_and_its_shim_refuse_alike(tmp_path: Path, bare_python: str, entry: list[str]) -> None:
    _fake_wheel(tmp_path, "sglang", FORK, "cp%d%d" % sys.version_info[:2])
    proc = _run([sys.executable, *entry, "--mode", "overlay", "--python", bare_python, str(tmp_path)])
    assert proc.returncode == 2 and "has no sglang to overlay: use --mode full" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("entry", [["-m", "sglang_fastpath", "lock"], ["-m", "sglang_fastpath.lock"]])
def test_the_lock_verb_and_its_shim_refuse_a_wheel_of_another_python(tmp_path: Path, entry: list[str]) -> None:
    wheel = _fake_wheel(tmp_path, "sglang", FORK, "cp39")
    proc = _run([sys.executable, *entry, "--lock-dir", str(tmp_path / "lock"), str(wheel)])
    assert proc.returncode == 2 and "is not a cp%d%d wheel" % sys.version_info[:2] in proc.stderr, proc.stderr
    assert not (tmp_path / "lock").exists()


def test_wheelhouse_modes_refuse_the_bundle_options(tmp_path: Path, bare_python: str) -> None:
    proc = _run([sys.executable, "-m", "sglang_fastpath", "install", "--mode", "full", "--stock", str(tmp_path)])
    assert proc.returncode == 2 and "are for --mode bundle" in proc.stderr, proc.stderr


# ---------------------------------------------------------------- healthcheck and entrypoint


def _serve(status: int) -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(status if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _healthcheck(port: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SGLANG_FASTPATH_PORT": str(port), "SGLANG_FASTPATH_HEALTH_TIMEOUT": "5",
           "http_proxy": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    return _run([sys.executable, str(DOCKER / "healthcheck.py")], timeout=30, env=env)


@pytest.mark.parametrize("status, healthy", [(200, True), (503, False)])
def test_healthcheck_follows_the_health_endpoint(status: int, healthy: bool) -> None:
    server = _serve(status)
    try:
        proc = _healthcheck(server.server_address[1])
    finally:
        server.shutdown()
    assert (proc.returncode == 0) is healthy, proc.stdout + proc.stderr
    assert f"/health: {status}" in proc.stdout


def test_healthcheck_fails_when_nothing_listens() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert _healthcheck(port).returncode == 1


@pytest.mark.parametrize("args, port, expected", [
    ([], None, []),
    (["--model-path", "/models/tiny/target"], "8000", ["--model-path", "/models/tiny/target"]),
])
def test_entrypoint_serves_on_flags(tmp_path: Path, args: list[str], port: str | None, expected: list[str]) -> None:
    stub = tmp_path / "python3"
    stub.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$STUB_OUT"\n')
    stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "STUB_OUT": str(tmp_path / "argv")}
    env.pop("SGLANG_FASTPATH_PORT", None)
    if port:
        env["SGLANG_FASTPATH_PORT"] = port
    proc = _run(["bash", str(DOCKER / "entrypoint.sh"), *args], timeout=30, env=env)
    assert proc.returncode == 0, proc.stderr
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv == ["-m", "sglang.launch_server", "--host", "0.0.0.0", "--port", port or "30000", *expected]


def test_entrypoint_runs_other_commands() -> None:
    proc = _run(["bash", str(DOCKER / "entrypoint.sh"), "echo", "a command"], timeout=30)
    assert proc.returncode == 0 and proc.stdout == "a command\n"


# ---------------------------------------------------------------- the real install (slow)


def docker_run_server_args(markdown: str) -> list[list[str]]:
    """The server arguments (after the image name) of every ``docker run`` that serves."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", markdown, re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            if not line.strip().startswith("docker run"):
                continue
            tokens = shlex.split(line)
            image = next(i for i, t in enumerate(tokens) if t.startswith("sglang-fastpath:"))
            if tokens[image + 1:] and tokens[image + 1].startswith("-"):
                commands.append(tokens[image + 1:])
    return commands


def _image_python() -> str:
    """Python 3.12 (the image's) if this machine has one that can make a venv, else this Python."""
    return find_python("3.12") or sys.executable


def _in_venv(venv: Path, *args: str, timeout: float = 900, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    return _run(list(args), timeout=timeout, env={**env, **env_extra})


@dataclass(frozen=True)
class ImageEnv:
    venv: Path
    wheelhouse: Path
    tag: str
    dependency_wheels: Path  # the lock's wheels, downloaded once: the venv and the image install from here
    demo: subprocess.CompletedProcess[str]  # demo.sh's install run that made the venv
    demo_env: dict[str, str]


@pytest.fixture(scope="module")
def image_env(tmp_path_factory: pytest.TempPathFactory) -> ImageEnv:
    """A venv made by demo.sh's install half: docker/install.sh --mode full as in the Dockerfile's runtime stage."""
    root = tmp_path_factory.mktemp("image")
    python = _image_python()
    tag = "cp%s" % _run([python, "-c", "import sys; print('%d%d' % sys.version_info[:2])"]).stdout.strip()
    started = time.monotonic()
    fetch_pinned(BASE_VERSION, tag)  # cached in build/cache/wheels: build-wheels below has no package index
    # The one download of the lock per run: demo.sh's venv and the image build both install from it.
    deps = root / "dependency-wheels"
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    fetched = _run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                    "--only-binary=:all:", "--python-version", f"{tag[2]}.{tag[3:]}", "--implementation", "cp",
                    *platforms, "--require-hashes", "-r", str(lock_path(DOCKER / "lock", tag)), "-d", str(deps)])
    assert fetched.returncode == 0, fetched.stdout[-3000:] + fetched.stderr[-3000:]
    # demo.sh as a user runs it, with no GPU, and pip's settings for a local wheelhouse (the image build passes the
    # same two as build arguments): its wheels stage and `docker/install.sh --mode full` take everything from there.
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "SGLANG_FASTPATH_ENV": str(root / "venv"),
           "SGLANG_FASTPATH_PYTHON": python, "SGLANG_FASTPATH_NVIDIA_SMI": "no-such-nvidia-smi",
           "SGLANG_FASTPATH_MIN_FREE_GB": "12", "PIP_FIND_LINKS": str(deps), "PIP_NO_INDEX": "1"}
    demo = _run(["bash", str(REPO / "demo.sh")], timeout=1800, env=env)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    print(f"\nimage_env: {tag}, download + demo.sh's install (build-wheels, install --mode full) took "
          f"{time.monotonic() - started:.0f} s")
    return ImageEnv(root / "venv", root / "venv" / "wheelhouse", tag, deps, demo, env)


@pytest.mark.network
def test_demo_sh_installs_verifies_and_stops_without_a_gpu(image_env: ImageEnv) -> None:
    last = image_env.demo.stderr.strip().splitlines()[-1]
    assert last.startswith(f"demo.sh: no GPU here (no-such-nvidia-smi not found): sglang {FORK} is installed in "
                           f"{image_env.venv} and verified (the locked dependencies, pip check, import sglang"), last
    assert f"install: sglang {FORK} (full mode, {image_env.tag})" in image_env.demo.stdout
    started = time.monotonic()
    again = _run(["bash", str(REPO / "demo.sh")], timeout=120, env=image_env.demo_env)
    assert again.returncode == 0 and again.stderr.startswith(f"demo.sh: reusing {image_env.venv} (sglang {FORK})")
    assert time.monotonic() - started < 30 and again.stdout == "", again.stdout[-2000:]


def _version(venv: Path) -> str:
    code = "import sglang; from importlib.metadata import version; print(version('sglang'))"
    proc = _in_venv(venv, str(venv / "bin" / "python"), "-c", code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.network
def test_full_install_is_the_fork_and_consistent(image_env: ImageEnv) -> None:
    venv = image_env.venv
    assert _version(venv) == FORK
    check = _in_venv(venv, str(venv / "bin" / "python"), "-m", "pip", "check")
    assert check.returncode == 0, check.stdout
    cli = _in_venv(venv, str(venv / "bin" / "sglang-fastpath"), "--version")
    assert cli.returncode == 0, cli.stderr
    # the shipped adaptive configs are package data of the tool's wheel, not files of a checkout
    config = _in_venv(venv, str(venv / "bin" / "sglang-fastpath"), "adaptive-config", "ks")
    assert config.returncode == 0 and Path(config.stdout.strip()).is_file(), config.stdout + config.stderr
    assert Path(config.stdout.strip()).resolve().is_relative_to(venv.resolve()), config.stdout


@pytest.mark.network
def test_full_install_holds_exactly_the_lock(image_env: ImageEnv) -> None:
    venv = image_env.venv
    listed = _in_venv(venv, str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json")
    installed = {canonical_name(d["name"]): d["version"] for d in json.loads(listed.stdout)}
    lock = read_lock(lock_path(DOCKER / "lock", image_env.tag))
    assert {p.name: p.version for p in lock.pins}.items() <= installed.items()
    assert set(installed) - {p.name for p in lock.pins} == {"sglang", "sglang-fastpath", "pip"}


@pytest.mark.network
def test_docs_server_flags_exist_in_sglang_0_5_17(image_env: ImageEnv) -> None:
    commands = [args for doc in DOCS if doc.is_file() for args in docker_run_server_args(doc.read_text())]
    assert len(commands) >= 4 and all("--speculative-algorithm" in args for args in commands)
    # Exact names only: argparse would otherwise accept an abbreviation such as --tp.
    code = ("import argparse, json, sys\nfrom sglang.srt.server_args import ServerArgs\n"
            "p = argparse.ArgumentParser(allow_abbrev=False)\nServerArgs.add_cli_args(p)\n"
            "for argv in json.loads(sys.argv[1]):\n    p.parse_args(argv)\nprint('parsed', len(json.loads(sys.argv[1])))\n")
    venv = image_env.venv
    proc = _in_venv(venv, str(venv / "bin" / "python"), "-c", code, json.dumps(commands))
    assert proc.returncode == 0 and f"parsed {len(commands)}" in proc.stdout, proc.stderr[-2000:]


@pytest.mark.network
def test_overlay_replaces_only_sglang(image_env: ImageEnv) -> None:
    venv = image_env.venv
    python = str(venv / "bin" / "python")
    before = _in_venv(venv, python, "-m", "pip", "freeze").stdout
    # What the lmsysorg base holds: the pristine 0.5.17 with the same dependencies.
    pristine = _in_venv(venv, python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall",
                        str(fetch_pinned(BASE_VERSION, image_env.tag)))
    assert pristine.returncode == 0 and _version(venv) == BASE_VERSION, pristine.stderr[-2000:]
    proc = _in_venv(venv, "bash", str(DOCKER / "install.sh"), "--mode", "overlay", str(image_env.wheelhouse))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert _version(venv) == FORK
    assert _in_venv(venv, python, "-m", "pip", "freeze").stdout == before


# ---------------------------------------------------------------- the image, built and started (slow)

APP_UID = "10001"
HEALTHCHECK = ["CMD", "python3", "/opt/sglang-fastpath/healthcheck.py"]
NOT_SERVED = ("not checked: serving a model. This CI machine has no GPU, and SGLang's server needs CUDA to "
              "load one, so the container is never asked to serve; the README's docker run does that on a GPU host")


@dataclass(frozen=True)
class BuiltImage:
    engine: Engine
    build: Build
    config: dict  # docker image inspect's Config
    patches: list[str]  # patches/series when the build read the context


def _say(request: pytest.FixtureRequest, lines: list[str]) -> None:
    """Print to the test log even under -q, past pytest's output capture."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        print(*lines, sep="\n", file=sys.__stderr__)
        return
    with capture.global_and_fixture_disabled():
        reporter.write("\n")
        for line in lines:
            reporter.write_line(line)


# Measured in a CI run on this kind of machine: the image step's scratch folder grew to about 30 GB.
IMAGE_STEP_DISK_BYTES = 35 * 10**9


@pytest.fixture(scope="module")
def image(image_env: ImageEnv, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    """docker/Dockerfile built on the CI bases, its dependencies from ``image_env``'s one download."""
    started = time.monotonic()
    if image_env.tag != "cp312":
        pytest.skip(f"the Docker image step is skipped: the install test ran {image_env.tag} (no Python 3.12 "
                    "here), and the image needs the cp312 wheels; it would download them a second time")
    scratch = tmp_path_factory.mktemp("docker-image")
    free = shutil.disk_usage(scratch).free
    if free < IMAGE_STEP_DISK_BYTES:
        pytest.skip(f"the Docker image step is skipped: {free / 1e9:.0f} GB free under {scratch}, it needs about "
                    f"{IMAGE_STEP_DISK_BYTES / 1e9:.0f} GB (the 10 GB image, BuildKit's copy of its layers, the bases)")
    try:
        engine = start_engine(scratch / "engine")
    except Unavailable as exc:
        pytest.skip(f"the Docker image step is skipped: {exc}")
    lines = [f"docker image step: {engine.describe()} in {time.monotonic() - started:.0f} s"]
    try:
        mark = time.monotonic()
        make_bases(engine, scratch)
        lines.append(f"docker image step: CI bases (debootstrap noble, docker import, Python 3.12) in "
                     f"{time.monotonic() - mark:.0f} s")
        patches = read_series(REPO / "patches").names
        build = build_image(engine, scratch, image_env.dependency_wheels)
        inspect = json.loads(engine.docker("image", "inspect", build.image).stdout)[0]
        lines.append(f"docker image step: built {build.image} in {build.seconds:.0f} s, size "
                     f"{inspect['Size'] / 1e9:.2f} GB, {len(build.served_wheels)} dependency wheels from the install "
                     f"test's download, CA bundle secret {'given' if build.ca_secret else 'not needed'}")
        yield BuiltImage(engine, build, inspect["Config"], patches)
    finally:
        lines.append(f"docker image step: {engine.stop()}")
        lines.append(f"docker image step: {NOT_SERVED}")
        lines.append(f"docker image step: took {time.monotonic() - started:.0f} s in all")
        _say(request, lines)


def _in_image(image: BuiltImage, *cmd: str, user: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run through the image's entrypoint (a command that is not a flag runs as given), without network."""
    as_user = ["--user", user] if user else []
    return image.engine.docker("run", "--rm", "--network", "none", *as_user, image.build.image, *cmd,
                               timeout=timeout, check=False)


@pytest.mark.network
def test_image_doctor_reports_the_fork_and_its_patches(image: BuiltImage) -> None:
    proc = _in_image(image, "python3", "-m", "sglang_fastpath", "doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    names = image.patches
    assert f"sglang {FORK}: fastpath on {BASE_VERSION}, {len(names)} patches applied" in proc.stdout, proc.stdout
    assert all(f"  patch {name}" in proc.stdout.splitlines() for name in names), proc.stdout


@pytest.mark.network
def test_image_ships_the_adaptive_configs(image: BuiltImage) -> None:
    proc = _in_image(image, "sh", "-c", 'test -s "$(sglang-fastpath adaptive-config ks-off)" && echo found')
    assert proc.returncode == 0 and "found" in proc.stdout, proc.stdout + proc.stderr[-2000:]


@pytest.mark.network
def test_image_imports_sglangs_engine(image: BuiltImage) -> None:
    proc = _in_image(image, "python3", "-c", "import sglang.srt.entrypoints.engine; print('engine imported')")
    assert proc.returncode == 0 and "engine imported" in proc.stdout, proc.stderr[-3000:]


@pytest.mark.network
def test_image_launch_server_help_runs(image: BuiltImage) -> None:
    proc = _in_image(image, "python3", "-m", "sglang.launch_server", "--help")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "--speculative-algorithm" in proc.stdout and "--model-path" in proc.stdout


@pytest.mark.network
def test_image_runs_as_its_non_root_user(image: BuiltImage) -> None:
    assert image.config["User"] == "sglang"
    proc = _in_image(image, "sh", "-c", 'id -u; test -w /models && test -w "$HOME/.cache" && echo writable')
    assert proc.returncode == 0 and proc.stdout.split() == [APP_UID, "writable"], proc.stdout + proc.stderr


@pytest.mark.network
def test_image_declares_the_healthcheck(image: BuiltImage) -> None:
    check = image.config["Healthcheck"]
    assert check["Test"] == HEALTHCHECK
    assert (check["Interval"], check["Timeout"], check["StartPeriod"], check["Retries"]) == (
        30 * 10**9, 10 * 10**9, 30 * 60 * 10**9, 3)
    # Nothing serves in CI: the probe itself runs in the image and reports the port as unhealthy.
    proc = _in_image(image, *HEALTHCHECK[1:])
    assert proc.returncode == 1 and "http://127.0.0.1:30000/health" in proc.stdout, proc.stdout + proc.stderr


def _pem_marker(certificate: Path) -> str:
    """One base64 line from the middle of a PEM certificate: specific to that certificate."""
    body = [line for line in certificate.read_text().splitlines() if line and not line.startswith("-----")]
    return body[len(body) // 2]


@pytest.mark.network
def test_image_keeps_no_build_ca(image: BuiltImage) -> None:
    listed = _in_image(image, "sh", "-c", "ls -A /usr/local/share/ca-certificates; ls -A /run/secrets 2>/dev/null; true")
    assert listed.returncode == 0 and listed.stdout.strip() == "", listed.stdout
    markers = [_pem_marker(path) for path in host_extra_cas()]
    if not markers:
        return
    # Everywhere a CA bundle lives or a build could leave one; in the venv, every .pem and .crt (certifi's too).
    where = ["/etc", "/usr/local", "/usr/lib/ssl", "/usr/share/ca-certificates", "/home", "/root", "/tmp", "/run",
             "/models"]
    args = [arg for marker in markers for arg in ("-e", marker)]
    script = 'grep -rlsF "$@" $(find /opt/sglang -name "*.pem" -o -name "*.crt"); echo "status $?"'
    found = _in_image(image, "sh", "-c", script, "sh", *args, *where, user="0")  # root reads every file
    assert found.stdout.strip().endswith("status 1"), f"the host's CA certificate is in the image: {found.stdout}"


@pytest.mark.network
def test_image_installed_the_install_tests_download(image: BuiltImage, image_env: ImageEnv) -> None:
    downloaded = {p.name for p in image_env.dependency_wheels.glob("*.whl")}
    lock = read_lock(lock_path(DOCKER / "lock", image_env.tag))
    assert len(downloaded) == len(lock.pins)
    assert {Path(unquote(path)).name for path in image.build.served_wheels} == downloaded
    listed = _in_image(image, "python3", "-m", "pip", "list", "--format", "json", "--disable-pip-version-check")
    installed = {canonical_name(d["name"]): d["version"] for d in json.loads(listed.stdout)}
    assert {p.name: p.version for p in lock.pins}.items() <= installed.items()
    assert set(installed) - {p.name for p in lock.pins} == {"sglang", "sglang-fastpath", "pip"}

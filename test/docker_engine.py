"""A Docker engine for CI's image build: start one where none runs, make the local bases, build, stop.

CI's machine reaches Debian's and Ubuntu's package archives and PyPI, but no container
registry, so neither ``nvidia/cuda`` nor ``python:3.12-slim`` can be pulled there. What this
module does instead, for ``test/test_docker.py``:

- **engine**: use the Docker daemon that answers; otherwise start ``dockerd`` (root only), with
  its data, sockets and pid file in a scratch folder, no bridge network and no iptables rules.
  Where ``dockerd`` or ``debootstrap`` is missing it installs ``docker.io`` and ``debootstrap``
  with apt-get, but only under CI (``CI=true``), never on a developer's machine. Anything that
  keeps the engine from starting raises :class:`Unavailable`, which the tests turn into a skip.
- **bases**: ``debootstrap --variant=minbase`` of Ubuntu 24.04 (noble, the distribution of the
  real ``nvidia/cuda:...-ubuntu24.04`` base, whose Python 3.12 packages the Dockerfile installs),
  checked against the Ubuntu archive's signing key, then ``docker import``: the stand-in for
  ``CUDA_IMAGE``. The stand-in for ``WHEELS_IMAGE`` (``python:3.12-slim``) adds Python 3.12 with
  nothing but pip, as that image has.
- **build**: ``docker/Dockerfile`` unchanged, with only those base images swapped through build
  arguments; pip installs the dependency lock from the wheels the install test downloaded, served
  on the loopback (``PIP_FIND_LINKS`` + ``PIP_NO_INDEX=1``, so nothing is downloaded twice), and
  trusts the host's extra CA certificates through the build secret ``ca-bundle`` only.
- **stop**: the daemon this module started, by its pid, and its scratch folder.
"""

from __future__ import annotations

import http.server
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CI_BASE = "sglang-fastpath-ci/ubuntu:noble"
CI_PYTHON = "sglang-fastpath-ci/python:noble"
CI_IMAGE = "sglang-fastpath-ci/image:0.5.17"
UBUNTU_SUITE = "noble"
UBUNTU_MIRROR = "http://archive.ubuntu.com/ubuntu"
UBUNTU_SECURITY = "http://security.ubuntu.com/ubuntu"
# "Ubuntu Archive Automatic Signing Key (2018)": Debian's debootstrap has no Ubuntu keyring, so the
# suite's Release file is checked after the download against the key with this fingerprint.
UBUNTU_ARCHIVE_KEY = "F6ECB3762474EDA9D21B7022871920D1991BC93C"
HOST_EXTRA_CAS = Path("/usr/local/share/ca-certificates")
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
# python:3.12-slim as far as the wheels stage can tell: Python 3.12 with pip only, bash, apt.
_PYTHON_STANDIN = f"""FROM {CI_BASE}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates python3.12 python3.12-venv \\
 && rm -rf /var/lib/apt/lists/* \\
 && python3.12 -m venv /usr/local/python
ENV PATH=/usr/local/python/bin:$PATH
"""


class Unavailable(Exception):
    """No Docker engine can run here; the message says why and what would fix it."""


@dataclass
class Engine:
    """A Docker daemon to talk to, and the one this run started (if it did)."""

    client: str
    build_cmd: list[str]  # the BuildKit build command, without arguments
    env: dict[str, str]
    daemon: subprocess.Popen | None = None
    scratch: Path | None = None  # the started daemon's data root, exec root and socket
    tags: list[str] = field(default_factory=list)

    def docker(self, *args: str, timeout: float = 600, check: bool = True,
               stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([self.client, *args], capture_output=True, text=True, timeout=timeout,
                              env=self.env, input=stdin)
        if check and proc.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args[:3])} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
        return proc

    def describe(self) -> str:
        if self.daemon is None:
            return "used the Docker daemon that was running"
        return f"started dockerd (pid {self.daemon.pid})"

    def stop(self) -> str:
        """Stop the daemon this run started, by its pid, and remove its files; else remove our tags."""
        if self.daemon is None:
            if self.tags:
                self.docker("image", "rm", "-f", *self.tags, check=False)
            return "left the running Docker daemon running (removed this run's images)"
        os.kill(self.daemon.pid, signal.SIGTERM)
        try:
            self.daemon.wait(timeout=90)
            how = "stopped"
        except subprocess.TimeoutExpired:
            os.kill(self.daemon.pid, signal.SIGKILL)
            self.daemon.wait(timeout=30)
            how = "killed (no exit 90 s after SIGTERM)"
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
        return f"dockerd (pid {self.daemon.pid}) {how}"


def _run(cmd: list[str], timeout: float = 600, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)


def _install_tools() -> None:
    """docker.io and debootstrap from apt, only as root under CI; otherwise say what is missing."""
    missing = [tool for tool in ("dockerd", "debootstrap") if shutil.which(tool) is None]
    if not missing:
        return
    if os.environ.get("CI", "").lower() not in ("true", "1") or os.geteuid() != 0 or not shutil.which("apt-get"):
        raise Unavailable(f"no {' or '.join(missing)} here (apt-get install docker.io debootstrap; "
                          "CI installs them itself, as root with CI=true)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"],
                ["apt-get", "install", "-y", "-q", "--no-install-recommends", "docker.io", "debootstrap"]):
        proc = _run(cmd, timeout=900, env=env)
        if proc.returncode != 0:
            raise Unavailable(f"{' '.join(cmd[:2])} failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")


def _client_major(client: str) -> int:
    proc = _run([client, "version", "--format", "{{.Client.Version}}"], timeout=30)
    try:
        return int(proc.stdout.strip().split(".")[0])
    except ValueError:
        return 0


def _build_command(env: dict[str, str]) -> tuple[str, list[str], dict[str, str]]:
    """A docker client that builds with BuildKit: with the buildx plugin, or a pre-23 client's built-in one."""
    candidates = dict.fromkeys(filter(None, [shutil.which("docker"), "/usr/bin/docker"]))
    for client in candidates:
        if not os.access(client, os.X_OK):
            continue
        if _run([client, "buildx", "version"], timeout=30, env=env).returncode == 0:
            return client, [client, "buildx", "build", "--load"], env
        if 0 < _client_major(client) < 23:  # still talks to the daemon's BuildKit directly
            return client, [client, "build"], {**env, "DOCKER_BUILDKIT": "1"}
    raise Unavailable("no docker client here builds with BuildKit (install docker-buildx, or Debian's docker.io)")


def _answers(client: str, env: dict[str, str]) -> bool:
    return _run([client, "version", "--format", "{{.Server.Version}}"], timeout=30, env=env).returncode == 0


def start_engine(scratch: Path) -> Engine:
    """The running daemon if one answers, else a dockerd started here (root only)."""
    _install_tools()
    env = dict(os.environ)
    client, build_cmd, build_env = _build_command(env)
    if _answers(client, env):
        return Engine(client, build_cmd, build_env)
    if os.geteuid() != 0:
        raise Unavailable("no Docker daemon answers, and starting one needs root")
    scratch.mkdir(parents=True, exist_ok=True)
    socket = scratch / "docker.sock"
    log = open(scratch / "dockerd.log", "w")
    daemon = subprocess.Popen(
        [shutil.which("dockerd") or "dockerd", "--data-root", str(scratch / "data"), "--exec-root",
         str(scratch / "exec"), "--pidfile", str(scratch / "dockerd.pid"), "--host", f"unix://{socket}",
         "--bridge=none", "--iptables=false"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    env = {**env, "DOCKER_HOST": f"unix://{socket}"}
    engine = Engine(client, build_cmd, {**build_env, "DOCKER_HOST": env["DOCKER_HOST"]}, daemon, scratch)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            last = ((scratch / "dockerd.log").read_text().strip().splitlines() or ["no output"])[-1]
            shutil.rmtree(scratch, ignore_errors=True)
            raise Unavailable(f"dockerd exited with status {daemon.returncode}: {last[-300:]}")
        if socket.exists() and _answers(client, env):
            return engine
        time.sleep(1)
    engine.stop()
    raise Unavailable("dockerd did not answer within 60 s")


def _debootstrap_script() -> list[str]:
    """Debian's debootstrap knows Ubuntu releases after its own by the generic Ubuntu script."""
    scripts = Path("/usr/share/debootstrap/scripts")
    return [] if (scripts / UBUNTU_SUITE).exists() else [str(scripts / "gutsy")]


def _check_release_signature(rootfs: Path) -> None:
    """The suite's Release file is signed by the Ubuntu archive key (debootstrap ran without a keyring)."""
    lists = rootfs / "var/lib/apt/lists"
    release = next(lists.glob(f"*_dists_{UBUNTU_SUITE}_Release"))
    keyring = rootfs / "etc/apt/trusted.gpg.d/ubuntu-keyring-2018-archive.gpg"
    proc = _run(["gpgv", "--status-fd", "1", "--keyring", str(keyring), f"{release}.gpg", str(release)], timeout=60)
    signers = [line.split()[-1] for line in proc.stdout.splitlines() if line.startswith("[GNUPG:] VALIDSIG ")]
    if proc.returncode != 0 or UBUNTU_ARCHIVE_KEY not in signers:
        raise RuntimeError(f"{release.name} is not signed by the Ubuntu archive key {UBUNTU_ARCHIVE_KEY}: {proc.stderr[-500:]}")


def make_bases(engine: Engine, scratch: Path) -> None:
    """CI_BASE from debootstrap (Ubuntu's sources as in its official image), CI_PYTHON on top of it."""
    rootfs = scratch / "rootfs"
    proc = _run(["debootstrap", "--variant=minbase", "--components=main,universe", "--no-check-gpg",
                 UBUNTU_SUITE, str(rootfs), UBUNTU_MIRROR, *_debootstrap_script()], timeout=1200)
    if proc.returncode != 0:
        raise RuntimeError(f"debootstrap failed: {(proc.stdout + proc.stderr).strip()[-2000:]}")
    try:
        _check_release_signature(rootfs)
        sources = [f"deb {UBUNTU_MIRROR} {UBUNTU_SUITE} main universe",
                   f"deb {UBUNTU_MIRROR} {UBUNTU_SUITE}-updates main universe",
                   f"deb {UBUNTU_SECURITY} {UBUNTU_SUITE}-security main universe"]
        (rootfs / "etc/apt/sources.list").write_text("\n".join(sources) + "\n")
        for leftover in (rootfs / "var/lib/apt/lists").glob("*_*"):
            leftover.unlink()
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run([engine.client, "import", "-", CI_BASE], stdin=tar.stdout, capture_output=True,
                                  text=True, env=engine.env, timeout=600)
        tar.wait(timeout=60)
        if imported.returncode != 0 or tar.returncode != 0:
            raise RuntimeError(f"docker import failed: {imported.stderr.strip()[-1000:]}")
        engine.tags.append(CI_BASE)
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
    built = _run([*engine.build_cmd, "--network", "host", "-t", CI_PYTHON, "-"], input=_PYTHON_STANDIN,
                 env=engine.env, timeout=1200)
    if built.returncode != 0:
        raise RuntimeError(f"building {CI_PYTHON} failed: {built.stderr.strip()[-2000:]}")
    engine.tags.append(CI_PYTHON)


class _WheelServer:
    """The install test's downloaded wheels on http://127.0.0.1:PORT/ (pip's find-links), counting what pip fetched."""

    def __init__(self, folder: Path) -> None:
        served: list[str] = []

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs) -> None:
                super().__init__(*args, directory=str(folder), **kwargs)

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path.endswith(".whl"):
                    served.append(self.path)
                super().do_GET()

            def log_message(self, *args: object) -> None:
                pass

        self.served = served
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def host_extra_cas() -> list[Path]:
    """The CA certificates this host adds to the system's (``update-ca-certificates``' input)."""
    return sorted(HOST_EXTRA_CAS.rglob("*.crt")) if HOST_EXTRA_CAS.is_dir() else []


def _ca_bundle(scratch: Path) -> Path | None:
    """The system bundle plus the host's extra CAs, for the build secret; None when the host adds none."""
    extra = host_extra_cas()
    if not extra:
        return None
    bundle = scratch / "ca-bundle.pem"
    parts = [HOST_CA_BUNDLE.read_text()] if HOST_CA_BUNDLE.is_file() else []
    bundle.write_text("\n".join([*parts, *(p.read_text() for p in extra)]))
    return bundle


@dataclass(frozen=True)
class Build:
    image: str
    seconds: float
    served_wheels: list[str]  # the dependency wheels pip fetched from the install test's download
    ca_secret: bool
    log: Path


def build_image(engine: Engine, scratch: Path, dependency_wheels: Path) -> Build:
    """docker/Dockerfile on the CI bases, the dependency lock from ``dependency_wheels`` only."""
    bundle = _ca_bundle(scratch)
    server = _WheelServer(dependency_wheels)
    log = scratch / "build.log"
    cmd = [*engine.build_cmd, "--progress", "plain", "--network", "host", "-f", str(REPO / "docker/Dockerfile"),
           "-t", CI_IMAGE, "--build-arg", f"CUDA_IMAGE={CI_BASE}", "--build-arg", f"WHEELS_IMAGE={CI_PYTHON}",
           "--build-arg", f"PIP_FIND_LINKS={server.url}", "--build-arg", "PIP_NO_INDEX=1"]
    if bundle is not None:
        cmd += ["--secret", f"id=ca-bundle,src={bundle}"]
    started = time.monotonic()
    try:
        with open(log, "w") as out:
            proc = subprocess.run([*cmd, str(REPO)], stdout=out, stderr=subprocess.STDOUT, env=engine.env,
                                  timeout=2700)
    finally:
        server.close()
        if bundle is not None:
            bundle.unlink()
    if proc.returncode != 0:
        raise RuntimeError(f"docker build exited {proc.returncode}; its log ends:\n{log.read_text()[-4000:]}")
    engine.tags.append(CI_IMAGE)
    return Build(CI_IMAGE, time.monotonic() - started, server.served, bundle is not None, log)

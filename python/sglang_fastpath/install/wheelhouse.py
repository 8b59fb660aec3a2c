"""Install the fork into one Python environment: the one install code path of the project.

``sglang-fastpath install`` (``commands/install.py``) runs it; so does ``docker/install.sh``
(``python -m sglang_fastpath.install``, the same verb without the CLI's other imports, for a
bare environment), which the Dockerfile, ``demo.sh`` and ``test/test_docker.py`` run. The
offline bundle's modes (``--mode bundle``) are in ``bundle.py``, on the same probe and
pip call (``target.py``). Two modes for a wheelhouse:

``full``
    The environment has no SGLang (a bare CUDA image, a new venv). Install the locked
    dependency closure for the interpreter's Python tag (``docker/lock/<tag>.txt``,
    every package pinned to one version and one sha256: ``--require-hashes --no-deps``),
    then the fork's wheels with ``--no-deps``.
``overlay``
    The environment already has the pristine ``sglang==BASE_VERSION`` and its
    dependencies (upstream's ``lmsysorg/sglang:v0.5.17-cu130`` image). Replace SGLang
    with the fork wheel, ``--no-deps``, and touch nothing else.

Both end with the same verification, which fails the install: the installed sglang
is the wheel's version and carries ``fastpath.json``, ``import sglang`` works, and
``pip check`` finds no unmet requirement of the fork's packages (in ``full`` mode, of
any package). Exit status: 0 installed and verified, 1 verification failed, 2 a user
error (wrong mode for the environment, no wheel for its Python tag, no lock).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from pathlib import Path

from sglang_fastpath.errors import FastpathError
from sglang_fastpath.fetch import wheel_version
from sglang_fastpath.install.lock import canonical_name, lock_path, read_lock
from sglang_fastpath.install.target import Target, VerifyError, pip_check, pip_install, probe, run_python
from sglang_fastpath.pins import BASE_VERSION
from sglang_fastpath.wheel.archive import MANIFEST, verify_record

# The fork's own distributions besides sglang, installed from the wheelhouse with --no-deps.
# A package the fork adds later (kernels, tuned configs) joins this tuple and docker/build-wheels.sh.
FORK_DISTRIBUTIONS = ("sglang-fastpath",)
FORK_SUFFIX = "+fastpath."

_VERIFY = """
import json
from importlib import metadata
import sglang
dist = metadata.distribution("sglang")
print(json.dumps({"version": dist.version, "manifest": dist.read_text("%s"), "module": sglang.__file__}))
""" % MANIFEST


class Mode(enum.Enum):
    FULL = "full"
    OVERLAY = "overlay"


@dataclass(frozen=True)
class Wheelhouse:
    sglang: Path
    extras: tuple[Path, ...]  # wheels of FORK_DISTRIBUTIONS

    @property
    def version(self) -> str:
        return wheel_version(self.sglang)


@dataclass
class InstallReport:
    mode: Mode
    target: Target
    wheelhouse: Wheelhouse
    installed_version: str = ""
    warnings: list[str] = field(default_factory=list)


def distribution_of(wheel: Path) -> str:
    return canonical_name(wheel.name.split("-", 1)[0])


def find_wheelhouse(source: Path, tag: str) -> Wheelhouse:
    """The fork wheel for ``tag`` (``source`` is that wheel or a folder holding it) and the fork's extras."""
    if source.is_file():
        candidates, extras = [source], []
    elif source.is_dir():
        wheels = sorted(source.glob("*.whl"))
        candidates = [w for w in wheels if distribution_of(w) == "sglang" and f"-{tag}-" in w.name]
        extras = [w for w in wheels if distribution_of(w) in FORK_DISTRIBUTIONS]
    else:
        raise FastpathError(f"{source} is neither a wheel nor a folder of wheels: pass the wheelhouse that "
                            "docker/build-wheels.sh wrote")
    if not candidates:
        raise FastpathError(f"no sglang {tag} wheel in {source}: build it with docker/build-wheels.sh {source} {tag}")
    if len(candidates) > 1:
        raise FastpathError(f"{len(candidates)} sglang {tag} wheels in {source}: keep only the release to install")
    wheel = candidates[0]
    if distribution_of(wheel) != "sglang" or f"-{tag}-" not in wheel.name:
        raise FastpathError(f"{wheel.name} is not an sglang {tag} wheel, but the target Python is {tag}")
    if not wheel_version(wheel).startswith(BASE_VERSION + FORK_SUFFIX):
        raise FastpathError(f"{wheel.name} is not a fork wheel (sglang-{BASE_VERSION}{FORK_SUFFIX}N): "
                            "build it with 'sglang-fastpath wheel'")
    problems = verify_record(wheel)
    if problems:
        raise FastpathError(f"{wheel.name} is damaged ({problems[0]}): rebuild it")
    return Wheelhouse(wheel, tuple(extras))


def check_mode(mode: Mode, target: Target) -> None:
    """Refuse a mode that does not fit the environment, naming the fix."""
    present = target.sglang
    is_fork = present is not None and present.startswith(BASE_VERSION + FORK_SUFFIX)
    if mode is Mode.FULL:
        if present is not None and not is_fork:
            raise FastpathError(f"{target.python} already has sglang {present}: use --mode overlay to replace "
                                "only sglang, or a fresh environment for --mode full")
        if target.machine != "x86_64":
            raise FastpathError(f"the dependency locks are for x86_64, not {target.machine}: use --mode overlay "
                                "on an image that already has sglang and its dependencies")
    elif present is None:
        raise FastpathError(f"{target.python} has no sglang to overlay: use --mode full")
    elif present != BASE_VERSION and not is_fork:
        raise FastpathError(f"{target.python} has sglang {present}, but the fork is built on {BASE_VERSION}: "
                            f"use the lmsysorg/sglang:v{BASE_VERSION}-cu130 base, or --mode full in a fresh environment")


def fatal_problems(problems: list[str], mode: Mode) -> list[str]:
    """The pip-check problems that fail the install: all in full mode, the fork's own in overlay mode."""
    if mode is Mode.FULL:
        return problems
    ours = {"sglang", *FORK_DISTRIBUTIONS}
    return [p for p in problems if canonical_name(p.split(" ", 1)[0]) in ours]


def verify(report: InstallReport) -> None:
    expected = report.wheelhouse.version
    try:
        info = run_python(report.target.python, _VERIFY)
    except FastpathError as exc:
        raise VerifyError(f"import sglang failed after the install: {exc}") from None
    report.installed_version = info["version"]
    if info["version"] != expected:
        raise VerifyError(f"installed sglang is {info['version']}, expected {expected} ({info['module']})")
    manifest = json.loads(info["manifest"] or "{}")
    if manifest.get("version") != expected:
        raise VerifyError(f"installed sglang has no {MANIFEST} for {expected}: the fork wheel did not land")
    problems = pip_check(report.target.python)
    fatal = fatal_problems(problems, report.mode)
    report.warnings += [p for p in problems if p not in fatal]
    if fatal:
        raise VerifyError(f"pip check: {fatal[0]}" + (f" (and {len(fatal) - 1} more)" if len(fatal) > 1 else ""))


def install(source: Path, mode: Mode, python: str, lock_dir: Path) -> InstallReport:
    target = probe(python)
    house = find_wheelhouse(source, target.tag)
    check_mode(mode, target)
    if mode is Mode.FULL:
        lock_file = lock_path(lock_dir, target.tag)
        lock = read_lock(lock_file)
        if lock.base_version != BASE_VERSION or lock.python_tag != target.tag:
            raise FastpathError(f"{lock_file} locks sglang {lock.base_version} for {lock.python_tag}, not "
                                f"{BASE_VERSION} for {target.tag}: regenerate it with 'sglang-fastpath lock'")
        pip_install(target, "--require-hashes", "--only-binary=:all:", "-r", str(lock_file))
        pip_install(target, str(house.sglang), *map(str, house.extras))
    else:
        pip_install(target, "--force-reinstall", str(house.sglang), *map(str, house.extras))
    report = InstallReport(mode, target, house)
    verify(report)
    return report

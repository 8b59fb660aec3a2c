"""The pinned upstream: which SGLang wheels we build on, and their sha256 digests.

The digests were taken from wheels downloaded from PyPI with ``pip download`` and
are the only trust anchor for upstream code: a wheel whose version or digest does
not match is refused before anything is unpacked.
"""

from __future__ import annotations

from dataclasses import dataclass

BASE_VERSION = "0.5.17"
# Bumped for every release of the fork; the wheel is ``sglang==BASE_VERSION+fastpath.N``.
FASTPATH_RELEASE = 1
# The Python tag of the machine that edits the tree and runs CI; the GPU hosts use cp312.
SOURCE_TAG = "cp311"


@dataclass(frozen=True)
class WheelPin:
    version: str
    python_tag: str  # "cp311", "cp312" or "py3" for pure wheels
    filename: str
    sha256: str

    @property
    def python_version(self) -> str | None:
        """The ``--python-version`` that pip needs to fetch this wheel, or None for pure wheels."""
        if self.python_tag.startswith("cp"):
            return f"{self.python_tag[2]}.{self.python_tag[3:]}"
        return None

    @property
    def platform(self) -> str | None:
        if self.filename.endswith("-any.whl"):
            return None
        return self.filename[: -len(".whl")].split("-")[-1]


PINS: tuple[WheelPin, ...] = (
    WheelPin(
        "0.5.17",
        "cp311",
        "sglang-0.5.17-cp311-cp311-manylinux_2_34_x86_64.whl",
        "575e38f5683624ded3b4bb267f637a098e5ed37d13a1d1ff5ea09bd781a04d16",
    ),
    WheelPin(
        "0.5.17",
        "cp312",
        "sglang-0.5.17-cp312-cp312-manylinux_2_34_x86_64.whl",
        "fb4cba478a5dca5ee146550b39f33add1c4e475d21ee11810b86ed1c58068093",
    ),
    # The newest release on PyPI when the series was ported upstream (patches/upstream/v0.5.23/);
    # CPU-checked only: it needs torch 2.14, which our GPU hosts do not run.
    WheelPin(
        "0.5.23",
        "cp311",
        "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl",
        "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937",
    ),
    # The base our users ran when they hit the regression; only the backport applies to it.
    WheelPin(
        "0.5.9",
        "py3",
        "sglang-0.5.9-py3-none-any.whl",
        "8a936c4d25fea605f44254e533cff2144c73ceffbc1f8738aba393461bbb64d1",
    ),
)


def fastpath_version(release: int = FASTPATH_RELEASE) -> str:
    return f"{BASE_VERSION}+fastpath.{release}"


def find_pin(version: str, python_tag: str | None = None) -> WheelPin | None:
    """The pin for ``version``; ``python_tag`` picks among platform wheels (default SOURCE_TAG)."""
    candidates = [p for p in PINS if p.version == version]
    if not candidates:
        return None
    for pin in candidates:
        if pin.python_tag in (python_tag or SOURCE_TAG, "py3"):
            return pin
    return None


def python_tags(version: str = BASE_VERSION) -> list[str]:
    return [p.python_tag for p in PINS if p.version == version]

"""What a GPU host already has installed: the host manifest, and whether it satisfies a requirement.

A host manifest is a text file, one package a line: ``name==version``, or a bare ``name``
when the package is known to be there but its version is not (it is then taken to
satisfy every requirement: the bundle trusts the image). ``#`` starts a comment. The
manifest of the H200 device image ships in ``sglang_fastpath/data``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from sglang_fastpath.errors import FastpathError

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
DEFAULT_HOST = DATA_DIR / "host-h200-torch2.11.txt"


@dataclass(frozen=True)
class HostManifest:
    source: Path
    versions: dict[str, Version | None] = field(default_factory=dict)  # canonical name -> version or unknown

    def has(self, name: str) -> bool:
        return canonicalize_name(name) in self.versions

    def version(self, name: str) -> Version | None:
        return self.versions.get(canonicalize_name(name))

    def satisfies(self, name: str, specs: list[SpecifierSet]) -> bool:
        """True if the host has ``name`` at a version inside every one of ``specs`` (unknown: assumed)."""
        if not self.has(name):
            return False
        version = self.version(name)
        return version is None or all(s.contains(version, prereleases=True) for s in specs)


def parse_host_manifest(path: Path) -> HostManifest:
    if not path.is_file():
        raise FastpathError(f"host manifest not found: {path} (one 'name==version' or 'name' a line)")
    versions: dict[str, Version | None] = {}
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, text = (part.strip() for part in line.partition("=="))
        if not name or (sep and not text) or any(c in name for c in "<>=!~ ;["):
            raise FastpathError(f"{path}:{lineno}: '{raw.strip()}' is not 'name==version' or 'name'")
        try:
            versions[canonicalize_name(name)] = Version(text) if sep else None
        except InvalidVersion:
            raise FastpathError(f"{path}:{lineno}: '{text}' is not a valid version (PEP 440)") from None
    return HostManifest(path, versions)

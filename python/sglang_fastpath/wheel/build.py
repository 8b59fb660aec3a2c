"""``sglang-fastpath wheel``: the patched SGLang wheel, ``sglang==0.5.17+fastpath.N``.

Built from the verified pristine wheel of each Python tag: every member is copied
unchanged except the files the series touches, which come from the patched tree.
The dist-info is renamed for the new version, its METADATA carries that version,
``fastpath.json`` records the series applied, and RECORD is recomputed. Members get
a fixed timestamp, so the same inputs give the same wheel bytes.
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from sglang_fastpath.digest import sha256_of
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.fetch import fetch_pinned
from sglang_fastpath.paths import patches_dir
from sglang_fastpath.pins import BASE_VERSION, FASTPATH_RELEASE, fastpath_version, python_tags
from sglang_fastpath.series.patches import Series, read_series
from sglang_fastpath.series.tree import build_tree, changed_files, package_path
from sglang_fastpath.wheel.archive import MANIFEST, write_member, write_record


@dataclass(frozen=True)
class BuiltWheel:
    path: Path
    version: str
    patched_files: list[str]


def manifest(series: Series, pristine: Path, version: str) -> dict:
    return {
        "version": version,
        "base_version": BASE_VERSION,
        "base_wheel": pristine.name,
        "base_sha256": sha256_of(pristine),
        "patches": [{"name": p.name, "sha256": sha256_of(p)} for p in series.patches],
    }


def _rewrite_metadata(text: str, version: str) -> str:
    lines = text.splitlines(keepends=True)
    out = [f"Version: {version}\n" if line.startswith("Version: ") else line for line in lines]
    if out == lines:
        raise FastpathError("pristine METADATA has no 'Version:' line")
    return "".join(out)


def build_wheel(pristine: Path, tree: Path, series: Series, out_dir: Path, release: int = FASTPATH_RELEASE
                ) -> BuiltWheel:
    """Write the patched wheel for ``pristine``'s tag into ``out_dir``; ``tree`` = pristine + series."""
    version = fastpath_version(release)
    old_info = f"sglang-{BASE_VERSION}.dist-info/"
    new_info = f"sglang-{version}.dist-info/"
    changes = {package_path(p): s for p, s in changed_files(tree).items()}
    name = pristine.name.replace(f"sglang-{BASE_VERSION}-", f"sglang-{version}-", 1)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / name
    rows: list[list[str]] = []
    with zipfile.ZipFile(pristine) as src, zipfile.ZipFile(target, "w") as dst:
        members = [i for i in src.infolist() if not i.filename.endswith("/")]
        for info in members:
            member = info.filename
            mode = info.external_attr >> 16 or 0o644 | 0o100000
            if member.startswith(old_info):
                if member.endswith("/RECORD"):
                    continue
                data = src.read(info)
                if member.endswith("/METADATA"):
                    data = _rewrite_metadata(data.decode(), version).encode()
                write_member(dst, new_info + member[len(old_info):], data, mode, rows)
                continue
            status = changes.get(member)
            if status == "D":
                continue
            data = (tree / "python" / member).read_bytes() if status == "M" else src.read(info)
            write_member(dst, member, data, mode, rows)
        for member, status in sorted(changes.items()):
            if status == "A":
                write_member(dst, member, (tree / "python" / member).read_bytes(), 0o100644, rows)
        info_json = json.dumps(manifest(series, pristine, version), indent=2, sort_keys=True) + "\n"
        write_member(dst, new_info + MANIFEST, info_json.encode(), 0o100644, rows)
        write_record(dst, new_info + "RECORD", rows)
    return BuiltWheel(target, version, sorted(changes))


def build_wheels(out_dir: Path, tags: list[str] | None = None, release: int = FASTPATH_RELEASE) -> list[BuiltWheel]:
    """Patched wheels for each pinned Python tag (default: all of them)."""
    series = read_series(patches_dir())
    built = []
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "sglang"
        for tag in tags or python_tags():
            pristine = fetch_pinned(BASE_VERSION, tag)
            if not (tree / ".git").is_dir():
                # The .py sources are the same in every tag's wheel; build the tree once.
                build_tree(pristine, series, tree)
            built.append(build_wheel(pristine, tree, series, out_dir, release))
    return built

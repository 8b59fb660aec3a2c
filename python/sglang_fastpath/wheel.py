"""``sglang-fastpath wheel``: the patched SGLang wheel, ``sglang==0.5.17+fastpath.N``.

Built from the verified pristine wheel of each Python tag: every member is copied
unchanged except the files the series touches, which come from the patched tree.
The dist-info is renamed for the new version, its METADATA carries that version,
``fastpath.json`` records the series applied, and RECORD is recomputed. Members get
a fixed timestamp, so the same inputs give the same wheel bytes.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
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

MANIFEST = "fastpath.json"
_EPOCH = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class BuiltWheel:
    path: Path
    version: str
    patched_files: list[str]


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


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


def _write(zf: zipfile.ZipFile, name: str, data: bytes, mode: int, rows: list[list[str]]) -> None:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.external_attr = (mode & 0xFFFF) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)
    rows.append([name, record_hash(data), str(len(data))])


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
                _write(dst, new_info + member[len(old_info):], data, mode, rows)
                continue
            status = changes.get(member)
            if status == "D":
                continue
            data = (tree / "python" / member).read_bytes() if status == "M" else src.read(info)
            _write(dst, member, data, mode, rows)
        for member, status in sorted(changes.items()):
            if status == "A":
                _write(dst, member, (tree / "python" / member).read_bytes(), 0o100644, rows)
        info_json = json.dumps(manifest(series, pristine, version), indent=2, sort_keys=True) + "\n"
        _write(dst, new_info + MANIFEST, info_json.encode(), 0o100644, rows)
        record = io.StringIO()
        writer = csv.writer(record, lineterminator="\n")
        writer.writerows(rows)
        writer.writerow([new_info + "RECORD", "", ""])
        info = zipfile.ZipInfo(new_info + "RECORD", date_time=_EPOCH)
        info.external_attr = 0o100644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        dst.writestr(info, record.getvalue())
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


def verify_record(wheel: Path) -> list[str]:
    """Problems with ``wheel``'s RECORD: missing entries, wrong hashes or sizes. Empty = valid."""
    problems = []
    with zipfile.ZipFile(wheel) as zf:
        records = [n for n in zf.namelist() if n.endswith(".dist-info/RECORD")]
        if len(records) != 1:
            return [f"expected one RECORD, found {len(records)}"]
        rows = {r[0]: r for r in csv.reader(io.StringIO(zf.read(records[0]).decode())) if r}
        for name in zf.namelist():
            if name.endswith("/"):
                continue
            row = rows.pop(name, None)
            if row is None:
                problems.append(f"{name}: not in RECORD")
            elif name != records[0]:
                data = zf.read(name)
                if row[1] != record_hash(data) or row[2] != str(len(data)):
                    problems.append(f"{name}: hash or size differs from RECORD")
        problems += [f"{name}: in RECORD but not in the wheel" for name in rows]
    return problems

"""Repack a wheel without some of its members: the slim bundle's trimmed wheels.

The result is a valid wheel that nobody can take for the index's file: its version
carries a local label (``0.4.5+slim.sm90``) or, where the version must stay (the fork's
own sglang), its file name carries a build tag (``-1slim-``). What was dropped, stripped
or edited is listed in ``<dist-info>/TRIMMED.json`` and RECORD is recomputed.
"""

from __future__ import annotations

import fnmatch
import json
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import parse_wheel_filename

from sglang_fastpath.bundle.profiles import Trim
from sglang_fastpath.digest import sha256_of
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.wheel.archive import write_member, write_record

MARKER = "TRIMMED.json"


@dataclass
class TrimResult:
    path: Path
    upstream: str
    upstream_sha256: str
    dropped: list[str] = field(default_factory=list)
    dropped_bytes: int = 0
    by_pattern: dict[str, list[int]] = field(default_factory=dict)  # drop pattern -> [members, bytes]
    stripped: list[str] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)


def _strip(data: bytes, member: str) -> bytes:
    tool = shutil.which("strip")
    if tool is None:
        raise FastpathError(f"cannot strip {member}: no 'strip' on PATH (install binutils)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lib.so"
        path.write_bytes(data)
        proc = subprocess.run([tool, "--strip-unneeded", str(path)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise FastpathError(f"strip failed on {member}: {proc.stderr.strip()}")
        return path.read_bytes()


def _edit(data: bytes, member: str, old: str, new: str) -> bytes:
    lines = data.decode().splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.rstrip("\r\n") == old]
    if len(hits) != 1:
        raise FastpathError(f"{member}: expected the line '{old.strip()}' once, found it {len(hits)} times; "
                            "the upstream file changed: update bundle/profiles.py")
    lines[hits[0]] = new + "\n"
    return "".join(lines).encode()


def _names(wheel: Path, trim: Trim) -> tuple[str, str, str]:
    """(old version, new version, new file name) for ``trim`` of ``wheel``."""
    stem = wheel.name[: -len(".whl")].split("-")
    dist, version = stem[0], stem[1]
    parse_wheel_filename(wheel.name)  # refuse malformed names early
    tail = stem[-3:]
    new_version = f"{version}+{trim.local}" if trim.local else version
    build = [trim.build_tag] if trim.build_tag else stem[2:-3]
    return version, new_version, "-".join([dist, new_version, *build, *tail]) + ".whl"


def trim_wheel(wheel: Path, trim: Trim, out_dir: Path) -> TrimResult:
    """Write ``wheel`` less ``trim.drop``, with ``trim.strip`` stripped and ``trim.edits`` made, into ``out_dir``."""
    if "+" in wheel.name.split("-")[1] and trim.local:
        raise FastpathError(f"{wheel.name} already has a local version label; trim it with a build tag instead")
    version, new_version, name = _names(wheel, trim)
    result = TrimResult(out_dir / name, wheel.name, sha256_of(wheel))
    edits = {e.member: e for e in trim.edits}
    unmatched = set(trim.drop)
    rows: list[list[str]] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(result.path, "w") as dst:
        infos = [i for i in src.infolist() if not i.filename.endswith("/")]
        old_info = next(i.filename.split("/")[0] for i in infos if i.filename.endswith(".dist-info/METADATA"))
        new_info = old_info[: -len(f"-{version}.dist-info")] + f"-{new_version}.dist-info"
        for info in infos:
            member = info.filename
            patterns = [p for p in trim.drop if fnmatch.fnmatchcase(member, p)]
            if patterns:
                unmatched -= set(patterns)
                result.dropped.append(member)
                result.dropped_bytes += info.file_size
                tally = result.by_pattern.setdefault(patterns[0], [0, 0])
                tally[0] += 1
                tally[1] += info.file_size
                continue
            if member == f"{old_info}/RECORD":
                continue
            data = src.read(info)
            if member in trim.strip:
                data = _strip(data, member)
                result.stripped.append(member)
            if member in edits:
                data = _edit(data, member, edits[member].old, edits[member].new)
                result.edited.append(member)
            if member.startswith(old_info + "/"):
                member = new_info + member[len(old_info):]
                if member.endswith("/METADATA"):
                    data = _set_header(data, "Version", new_version)
                elif member.endswith("/WHEEL") and trim.build_tag:
                    data = _set_header(data, "Build", trim.build_tag)
            write_member(dst, member, data, info.external_attr >> 16 or 0o100644, rows)
        missing = unmatched | (set(trim.strip) - set(result.stripped)) | (set(edits) - set(result.edited))
        if missing:
            raise FastpathError(f"{wheel.name} has no member matching {sorted(missing)}; its layout changed: "
                                "update bundle/profiles.py")
        marker = {"trimmed_by": "sglang-fastpath bundle (slim)", "reason": trim.reason,
                  "upstream_wheel": result.upstream, "upstream_sha256": result.upstream_sha256,
                  "dropped": result.dropped, "stripped": result.stripped, "edited": result.edited}
        write_member(dst, f"{new_info}/{MARKER}", (json.dumps(marker, indent=1) + "\n").encode(), 0o100644, rows)
        write_record(dst, f"{new_info}/RECORD", rows)
    return result


def _set_header(data: bytes, key: str, value: str) -> bytes:
    """Set the RFC 822 header ``key`` of a METADATA or WHEEL file, in place or appended."""
    head, sep, body = data.decode().partition("\n\n")
    lines = head.splitlines()
    hits = [i for i, line in enumerate(lines) if line.startswith(f"{key}: ")]
    if hits:
        lines[hits[0]] = f"{key}: {value}"
    else:
        lines.append(f"{key}: {value}")
    return ("\n".join(lines) + "\n" + (sep[1:] + body if sep else "")).encode()

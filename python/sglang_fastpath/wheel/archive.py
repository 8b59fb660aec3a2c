"""Wheel archive members: written with a fixed timestamp and recorded in RECORD, and RECORD checked.

``build`` (the fork wheel) and ``trim`` (the slim bundle's wheels) write members with
``write_member`` and close with ``write_record``, so the same inputs give the same bytes;
``verify_record`` is what the tests, ``install`` and ``doctor`` trust a wheel by.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from pathlib import Path

MANIFEST = "fastpath.json"  # the fork wheel's dist-info member naming its base wheel and series
EPOCH = (1980, 1, 1, 0, 0, 0)  # every member's timestamp


def record_hash(data: bytes) -> str:
    """RECORD's hash field: ``sha256=`` and the urlsafe base64 digest without padding."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_member(zf: zipfile.ZipFile, name: str, data: bytes, mode: int, rows: list[list[str]]) -> None:
    """Write ``data`` as member ``name`` (file mode ``mode``, fixed timestamp) and add its RECORD row."""
    info = zipfile.ZipInfo(name, date_time=EPOCH)
    info.external_attr = (mode & 0xFFFF) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)
    rows.append([name, record_hash(data), str(len(data))])


def write_record(zf: zipfile.ZipFile, name: str, rows: list[list[str]]) -> None:
    """Write the RECORD member ``name``: ``rows`` and its own row without hash or size."""
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    writer.writerows(rows)
    writer.writerow([name, "", ""])
    info = zipfile.ZipInfo(name, date_time=EPOCH)
    info.external_attr = 0o100644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, record.getvalue())


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

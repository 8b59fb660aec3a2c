"""The test lanes: every test file has a row in test/README.md's table, and its markers agree.

The table's lane column names the markers a file uses (``fast`` alone: none of them). A new
file without a row, a row without a file, or a ``slow``/``network``/``gpu`` marker that the row
does not name (or a row naming one the file never uses) fails here, so a slow or downloading
test cannot slip into the fast lane unnoticed. Text only: nothing is imported or run.
"""

from __future__ import annotations

import re
from pathlib import Path

TEST_DIR = Path(__file__).resolve().parent
LANE_MARKERS = ("slow", "network", "gpu")
ROW = re.compile(r"^\| `(?P<file>[\w/]+\.py)` \| (?P<lane>[a-z +]+) \|")


def table_lanes() -> dict[str, set[str]]:
    """test/README.md's rows: file (relative to test/) -> the markers its lane names."""
    lanes: dict[str, set[str]] = {}
    for line in (TEST_DIR / "README.md").read_text().splitlines():
        match = ROW.match(line)
        if match:
            words = {w.strip() for w in match["lane"].split("+")}
            assert words <= {"fast", *LANE_MARKERS}, f"{match['file']}: unknown lane {match['lane']!r}"
            lanes[match["file"]] = words - {"fast"}
    return lanes


def used_markers(path: Path) -> set[str]:
    text = path.read_text()
    return {m for m in LANE_MARKERS if re.search(rf"pytest\.mark\.{m}\b", text)}


def test_every_test_file_has_a_row_whose_lane_matches_its_markers() -> None:
    lanes = table_lanes()
    files = {p.relative_to(TEST_DIR).as_posix() for p in TEST_DIR.rglob("test_*.py")}
    assert files - lanes.keys() == set(), "test files with no row in test/README.md's table"
    assert lanes.keys() - files == set(), "rows in test/README.md's table with no such file"
    wrong = {f: (sorted(lanes[f]), sorted(used_markers(TEST_DIR / f))) for f in sorted(files)
             if lanes[f] != used_markers(TEST_DIR / f)}
    assert wrong == {}, "file: (lane in the table, markers in the file)"

"""The CPU tests' SGLang trees are cached in build/cache/trees and rebuilt when they cannot be trusted."""

from __future__ import annotations

import zipfile
from pathlib import Path

from sglang_trees import READY, cached_tree


def wheel(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("sglang/__init__.py", "")
        zf.writestr("sglang/srt/mod.py", body)
    return path


def test_an_intact_tree_is_reused(tmp_path: Path) -> None:
    whl = wheel(tmp_path / "w" / "sglang-0.0.1-py3-none-any.whl", "X = 1\n")
    first = cached_tree(tmp_path / "cache", "pristine", whl, None)
    stamp = (first / READY).stat().st_mtime_ns
    (first / "python" / "sglang" / "srt" / "__pycache__").mkdir()  # what importing the tree writes
    again = cached_tree(tmp_path / "cache", "pristine", whl, None)
    assert again == first and (again / READY).stat().st_mtime_ns == stamp


def test_a_changed_tracked_file_means_a_rebuild(tmp_path: Path) -> None:
    whl = wheel(tmp_path / "w" / "sglang-0.0.1-py3-none-any.whl", "X = 1\n")
    tree = cached_tree(tmp_path / "cache", "pristine", whl, None)
    (tree / "python" / "sglang" / "srt" / "mod.py").write_text("X = 2\n")
    tree = cached_tree(tmp_path / "cache", "pristine", whl, None)
    assert (tree / "python" / "sglang" / "srt" / "mod.py").read_text() == "X = 1\n"


def test_other_wheel_bytes_make_another_tree_and_drop_the_old(tmp_path: Path) -> None:
    old = cached_tree(tmp_path / "cache", "pristine", wheel(tmp_path / "a" / "sglang-0.0.1-py3-none-any.whl", "X = 1\n"),
                      None)
    new = cached_tree(tmp_path / "cache", "pristine", wheel(tmp_path / "b" / "sglang-0.0.1-py3-none-any.whl", "X = 3\n"),
                      None)
    assert new != old and not old.exists()
    assert (new / "python" / "sglang" / "srt" / "mod.py").read_text() == "X = 3\n"


def test_a_tree_without_its_ready_mark_is_rebuilt(tmp_path: Path) -> None:
    whl = wheel(tmp_path / "w" / "sglang-0.0.1-py3-none-any.whl", "X = 1\n")
    tree = cached_tree(tmp_path / "cache", "pristine", whl, None)
    (tree / READY).unlink()  # a build that stopped half way
    assert (cached_tree(tmp_path / "cache", "pristine", whl, None) / READY).is_file()


def test_a_tree_moved_to_another_commit_is_rebuilt(tmp_path: Path) -> None:
    import subprocess

    whl = wheel(tmp_path / "w" / "sglang-0.0.1-py3-none-any.whl", "X = 1\n")
    tree = cached_tree(tmp_path / "cache", "pristine", whl, None)
    (tree / "python" / "sglang" / "srt" / "mod.py").write_text("X = 5\n")
    subprocess.run(["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "moved"],
                   check=True)
    tree = cached_tree(tmp_path / "cache", "pristine", whl, None)
    assert (tree / "python" / "sglang" / "srt" / "mod.py").read_text() == "X = 1\n"

"""Turn a verified SGLang wheel into a git tree laid out like the upstream repository.

The wheel's ``sglang/`` package goes to ``python/sglang/`` (its place upstream), so
patches made here carry upstream paths and apply with ``git am`` to the v0.5.x tag.
Compiled extensions (``*.so``) are left out: they are build outputs, not source, and
the patched wheel takes them from the pristine wheel unchanged.
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

from sglang_fastpath.digest import sha256_of
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.fetch import wheel_version
from sglang_fastpath.series import git
from sglang_fastpath.series.patches import Series

PACKAGE_PREFIX = "sglang/"
UPSTREAM_PREFIX = "python/"
PRISTINE_TAG = "pristine"


def is_source_member(name: str) -> bool:
    return name.startswith(PACKAGE_PREFIX) and not name.endswith("/") and not name.endswith(".so")


def unpack_pristine(wheel: Path, dest: Path, only: set[str] | None = None) -> str:
    """Create ``dest`` as a git repo whose first commit (tag ``pristine``) is the wheel's source.

    ``only``: just these upstream paths (those a series touches), for a check that needs no
    other file: a few files instead of the whole package.
    """
    if dest.exists():
        shutil.rmtree(dest)
    git.init(dest)
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if not is_source_member(info.filename):
                continue
            if only is not None and UPSTREAM_PREFIX + info.filename not in only:
                continue
            target = dest / UPSTREAM_PREFIX / info.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
    # Keep the tree exactly as shipped: no autocrlf or whitespace rewriting.
    (dest / ".git" / "info" / "attributes").write_text("* -text\n")
    version = wheel_version(wheel)
    message = (
        f"sglang {version} (pristine)\n\n"
        f"Unpacked from {wheel.name}\nsha256 {sha256_of(wheel)}\n"
    )
    head = git.commit_all(dest, message, git.PRISTINE_DATE, allow_empty=only is not None)
    git.git(dest, "tag", PRISTINE_TAG)
    return head


def apply_series(repo: Path, series: Series) -> None:
    """``git am`` every patch in order; stop with the patch name at the first failure."""
    for patch in series.patches:
        proc = git.am(repo, patch)
        if proc.returncode != 0:
            git.git(repo, "am", "--abort", check=False)
            detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            raise FastpathError(
                f"{patch.name} does not apply: {detail[0] if detail else 'git am failed'} "
                "(run 'sglang-fastpath check' for the failing hunk)"
            )


def build_tree(wheel: Path, series: Series, dest: Path) -> None:
    unpack_pristine(wheel, dest)
    apply_series(dest, series)


def changed_files(repo: Path) -> dict[str, str]:
    """``{upstream path: status}`` (A, M, D) of HEAD against the pristine tag."""
    out = git.git(repo, "diff", "--name-status", "--no-renames", PRISTINE_TAG, "HEAD").stdout
    result = {}
    for line in out.splitlines():
        status, path = line.split("\t", 1)
        result[path] = status[0]
    return result


def package_path(upstream_path: str) -> str:
    """``python/sglang/x.py`` -> ``sglang/x.py`` (the path inside the wheel)."""
    if not upstream_path.startswith(UPSTREAM_PREFIX + PACKAGE_PREFIX):
        raise FastpathError(
            f"{upstream_path} is outside python/sglang/: the wheel can only carry changes to the package"
        )
    return upstream_path[len(UPSTREAM_PREFIX):]

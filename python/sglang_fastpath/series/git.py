"""A thin, deterministic wrapper around the git command line.

Every commit made through it carries a fixed identity and the author date as the
committer date, so the same pristine wheel and the same series always produce the
same commit hashes, and ``export`` of an unchanged tree is byte-identical.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from sglang_fastpath.errors import FastpathError

IDENTITY = {"name": "sglang-fastpath", "email": "sglang-fastpath@users.noreply.github.com"}
# The pristine import is dated at the epoch so that its hash depends on content alone.
PRISTINE_DATE = "1970-01-01T00:00:00+0000"


def _env(date: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GIT_COMMITTER_NAME=IDENTITY["name"],
        GIT_COMMITTER_EMAIL=IDENTITY["email"],
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        LC_ALL="C",
    )
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
        env.update(GIT_AUTHOR_NAME=IDENTITY["name"], GIT_AUTHOR_EMAIL=IDENTITY["email"])
    return env


def git(repo: Path, *args: str, date: str | None = None, check: bool = True, input: str | None = None
        ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["git", "-C", str(repo), "-c", "core.abbrev=12", "-c", "user.name=" + IDENTITY["name"],
         "-c", "user.email=" + IDENTITY["email"], "-c", "commit.gpgsign=false", *args],
        capture_output=True, text=True, env=_env(date), input=input,
    )
    if check and proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise FastpathError(f"git {args[0]} failed in {repo}: {detail[0] if detail else 'no output'}")
    return proc


def init(repo: Path) -> None:
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")


def commit_all(repo: Path, message: str, date: str, allow_empty: bool = False) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", *(["--allow-empty"] if allow_empty else []), "-m", message, date=date)
    return git(repo, "rev-parse", "HEAD").stdout.strip()


def am(repo: Path, patch: Path) -> subprocess.CompletedProcess[str]:
    """Apply one mailbox patch as a commit; committer date = author date (deterministic)."""
    return git(repo, "am", "-q", "--committer-date-is-author-date", "--keep-cr", str(patch.resolve()), check=False)


def is_dirty(repo: Path) -> bool:
    return bool(git(repo, "status", "--porcelain", "--untracked-files=all").stdout.strip())

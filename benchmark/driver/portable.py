"""Recorded commands and environments without the machine's absolute paths.

A results folder is committed, so what the driver records (command.txt, env.json,
results.json's argv) shows the repository root as ``.`` (``cd .``, ``benchmark/e2e.py``,
``PYTHONPATH=python:/tmp/site-fork:.``), the interpreter as ``python3``, its virtual
environment as ``<venv>`` and the device tool's output folder as ``$OUT``. ``/tmp/...``
paths stay: they are the scripts' own scratch and install conventions
(test/gpu/device_env.sh). ``PATH`` is not recorded (its entries are the machine's).

``python -m benchmark.driver.portable --repo-root R --python P [--out O] [--home H] FOLDER...``
applies the same rewriting to the text files of existing results folders in place, and to the
text members of their ``.tar.gz`` archives (raw logs written on the device carry its paths too).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import re
import sys
import tarfile
from pathlib import Path
from typing import Any, Mapping

# Prefixes of a system interpreter, never taken for its virtual environment.
SYSTEM_PREFIXES = frozenset({"/", "/usr", "/usr/local"})
# Environment variables whose value lists the machine's folders: never recorded.
DROPPED_ENV = frozenset({"PATH"})
# The text files of a results folder, and of its .tar.gz archives (images are left alone).
TEXT_SUFFIXES = (".txt", ".json", ".md", ".sh", ".csv", ".jsonl", ".log")
_PATH_CHAR = r"[\w.\-]"


def _sub_dir(text: str, folder: str, placeholder: str) -> str:
    """``folder`` (a whole path component run, not a prefix of a longer name) as ``placeholder``."""
    return re.sub(rf"(?<![\w.\-/]){re.escape(folder)}(?!{_PATH_CHAR})", lambda _: placeholder, text)


def portable(text: str, repo_root: str | Path, python: str | Path, *, venv: str | Path | None = None,
             out: str | Path | None = None, home: str | Path | None = None) -> str:
    """``text`` with this machine's absolute paths replaced by portable ones.

    ``python`` (the interpreter's path) becomes ``python3``; ``venv`` (its environment's
    prefix, e.g. ``sys.prefix`` in a venv) ``<venv>``; ``out`` (the device tool's output
    folder) ``$OUT``; ``home`` (the user's home folder, in third-party caches' log lines) ``~``;
    a path under ``repo_root`` becomes relative to it (``R/python`` -> ``python``) and
    ``repo_root`` itself ``.``. The most specific path is replaced first,
    so ``out`` or ``venv`` inside the repository keep their placeholder. A path only
    matches as a whole (``/srv/repo`` does not touch ``/srv/repo2`` or ``/x/srv/repo``);
    empty or root (``/``) arguments are ignored.
    """
    rules: list[tuple[str, str]] = [(str(python), "python3")]
    rules += [(str(folder).rstrip("/"), name)
              for folder, name in ((venv, "<venv>"), (out, "$OUT"), (home, "~"), (repo_root, "."))
              if folder is not None]
    for path, name in sorted((r for r in rules if r[0] not in ("", "/", ".")), key=lambda r: -len(r[0])):
        if name == "python3":
            text = re.sub(rf"(?<![\w.\-/]){re.escape(path)}(?![\w.\-/])", "python3", text)
        elif name == ".":
            text = re.sub(rf"(?<![\w.\-/]){re.escape(path)}/(?={_PATH_CHAR})", "", text)
            text = _sub_dir(text, path, ".")
        else:
            text = _sub_dir(text, path, name)
    return text


def here(repo_root: str | Path) -> dict[str, Any]:
    """``portable``'s path keywords for this process: ``repo_root``, ``sys.executable``,
    ``sys.prefix`` when it is a virtual environment, and ``$OUT`` when set."""
    venv = sys.prefix if sys.prefix != sys.base_prefix and sys.prefix not in SYSTEM_PREFIXES else None
    return {"repo_root": repo_root, "python": sys.executable, "venv": venv, "out": os.environ.get("OUT") or None}


def portable_env(environ: Mapping[str, str], repo_root: str | Path, python: str | Path, *,
                 venv: str | Path | None = None, out: str | Path | None = None) -> dict[str, str]:
    """``environ`` without ``DROPPED_ENV`` and with each value made ``portable``."""
    return {k: portable(v, repo_root, python, venv=venv, out=out) for k, v in environ.items() if k not in DROPPED_ENV}


def _portable_json(data: Any, **paths: Any) -> Any:
    if isinstance(data, dict):
        return {k: _portable_json(v, **paths) for k, v in data.items() if k not in DROPPED_ENV}
    if isinstance(data, list):
        return [_portable_json(v, **paths) for v in data]
    return portable(data, **paths) if isinstance(data, str) else data


def _json_layout(text: str, data: Any) -> dict[str, Any] | None:
    """The ``json.dumps`` keywords (and final newline) that reproduce ``text``, if any do."""
    for indent in (1, 2, None):
        for ascii_only in (True, False):
            dumped = json.dumps(data, indent=indent, ensure_ascii=ascii_only)
            for end in ("\n", ""):
                if dumped + end == text:
                    return {"indent": indent, "ensure_ascii": ascii_only, "end": end}
    return None


def portable_file(path: Path, repo_root: str | Path, python: str | Path, *, venv: str | Path | None = None,
                  out: str | Path | None = None, home: str | Path | None = None) -> bool:
    """Rewrite one recorded file in place with ``portable``; a JSON file in its own layout
    also loses its ``DROPPED_ENV`` keys. Returns whether the file changed."""
    text = path.read_text()
    new = portable_text(text, path.suffix, repo_root=repo_root, python=python, venv=venv, out=out, home=home)
    if new == text:
        return False
    path.write_text(new)
    return True


def portable_text(text: str, suffix: str, **paths: Any) -> str:
    """``portable`` of a recorded file's ``text``; JSON (``suffix`` ``.json``) in its own layout also
    loses its ``DROPPED_ENV`` keys."""
    new = portable(text, **paths)
    if suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError:  # not JSON after all: the plain rewrite
            return new
        layout = _json_layout(text, data)
        if layout is not None:
            end = layout.pop("end")
            new = json.dumps(_portable_json(data, **paths), **layout) + end
    return new


def portable_archive(path: Path, **paths: Any) -> bool:
    """Rewrite the text members (``TEXT_SUFFIXES``, UTF-8) of a ``.tar.gz`` in place with ``portable``;
    other members, names and modes stay. Returns whether the archive changed."""
    with tarfile.open(path, "r:gz") as src:
        members = [(m, src.extractfile(m).read() if m.isfile() else None) for m in src.getmembers()]
    changed = False
    for i, (member, data) in enumerate(members):
        if data is None or Path(member.name).suffix not in TEXT_SUFFIXES:
            continue
        try:
            text = data.decode()
        except UnicodeDecodeError:
            continue
        new = portable_text(text, Path(member.name).suffix, **paths)
        if new != text:
            data = new.encode()
            member.size = len(data)
            members[i] = (member, data)
            changed = True
    if not changed:
        return False
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as dst:
        for member, data in members:
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
    path.write_bytes(buffer.getvalue())
    return True


def archives(folder: Path) -> list[Path]:
    """The ``.tar.gz`` files under ``folder``, sorted."""
    return sorted(p for p in folder.rglob("*.tar.gz") if p.is_file())


def text_files(folder: Path) -> list[Path]:
    """The files under ``folder`` whose suffix is one of ``TEXT_SUFFIXES``, sorted."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES)


def main(argv: list[str] | None = None) -> int:
    """Make the text files of the named results folders portable; print each changed file."""
    parser = argparse.ArgumentParser(prog="python -m benchmark.driver.portable", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="results folders (or single files) to rewrite in place")
    parser.add_argument("--repo-root", required=True, help="the repository root on the machine that ran them")
    parser.add_argument("--python", required=True, help="the interpreter path it recorded")
    parser.add_argument("--venv", help="the interpreter's environment prefix (default: two folders above --python)")
    parser.add_argument("--out", help="the device tool's output folder ($OUT) there")
    parser.add_argument("--home", help="the home folder there (third-party caches in logs), written as ~")
    args = parser.parse_args(argv)
    venv = args.venv if args.venv is not None else str(Path(args.python).parent.parent)
    venv = None if venv in SYSTEM_PREFIXES else venv
    paths = {"repo_root": args.repo_root, "python": args.python, "venv": venv, "out": args.out, "home": args.home}
    for folder in args.folders:
        files = text_files(folder) + archives(folder) if folder.is_dir() else [folder]
        for path in files:
            if not path.name.endswith(".tar.gz"):
                changed = portable_file(path, **paths)
            else:
                try:
                    changed = portable_archive(path, **paths)
                except (tarfile.TarError, EOFError, OSError) as e:
                    print(f"{path}: left as it is, not a readable .tar.gz ({e})", file=sys.stderr)
                    continue
            if changed:
                print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

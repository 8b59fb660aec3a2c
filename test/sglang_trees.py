"""Patched and pristine SGLang trees for CPU tests, and ways to run their code.

``build_trees`` unpacks the pinned wheels (0.5.17, the 0.5.9 backport base and
the newest upstream port's release, 0.5.23), pristine and with their series
applied, into ``build/cache/trees``, keyed by the wheel's and the patches' bytes,
and reuses an intact tree of the same key in later sessions. ``PATCHED`` names the trees a test of a patch runs on;
``SHOWS_THE_BUG`` marks their pristine twins, where such a test must fail. Two ways to run the
code of a tree on a CPU machine without SGLang's GPU dependencies:

* ``TreeImporter.use(tree)`` makes ``import sglang.srt...`` resolve to that
  tree, for modules whose imports are light (the flag modules, parallel_state).
  ``sglang/__init__.py`` (the frontend language API) is skipped, and
  ``torchvision`` gets a stub when it is not installed: SGLang imports
  ``torchvision.io.decode_jpeg`` at module level and never calls it here.
* ``load_defs(path, names)`` executes only the named top-level functions or
  classes (``Class.method`` for a method) of a source file, with the module's
  own imports for the names they use. For code whose module drags in model,
  tokenizer or kernel packages (EagerRunner, ModelRunner, ForwardMode).
"""

from __future__ import annotations

import ast
import dis
import hashlib
import importlib
import importlib.machinery
import os
import shutil
import sys
import types
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sglang_fastpath.digest import sha256_of
from sglang_fastpath.fetch import fetch_pinned
from sglang_fastpath.paths import build_dir, patches_dir
from sglang_fastpath.pins import BASE_VERSION
from sglang_fastpath.series import git
from sglang_fastpath.series.patches import Series, read_series
from sglang_fastpath.series.sets import find_set
from sglang_fastpath.series.tree import build_tree, unpack_pristine

BACKPORT_VERSION = "0.5.9"
UPSTREAM = find_set(None)  # the newest upstream port: patches/upstream/v<release>/

# A test of a patch runs on the patched tree of each series that carries it (0.5.17 and the
# upstream port); a pristine twin must fail it (xfail strict) where the bug exists there. The
# failure must come from the test's assertions (or a pytest.raises that did not raise), not from
# an error of the test itself.
PATCHED = ["patched", "upstream"]
SHOWS_THE_BUG = pytest.mark.xfail(
    strict=True, raises=(AssertionError, pytest.fail.Exception), reason="the pristine release has the bug"
)
PATCHED_AND_PRISTINE = [
    *PATCHED,
    pytest.param("pristine", marks=SHOWS_THE_BUG),
    pytest.param("upstream_pristine", marks=SHOWS_THE_BUG),
]


@dataclass(frozen=True)
class Trees:
    patched: Path  # 0.5.17 + patches/series, the repository root of the tree
    pristine: Path
    backport: Path  # 0.5.9 + patches/backport/v0.5.9/series
    backport_pristine: Path
    upstream: Path  # 0.5.23 + patches/upstream/v0.5.23/series
    upstream_pristine: Path

    def get(self, name: str) -> Path:
        return getattr(self, name)


TREE_FORMAT = "1"  # bump when the way a tree is built changes: every cached tree is rebuilt
READY = ".fastpath-tree-ready"


def _tree_key(wheel: Path, series: Series | None) -> str:
    """What a tree is made of: the wheel's bytes and, patched, every patch's bytes, in order."""
    h = hashlib.sha256(f"{TREE_FORMAT}\n{sha256_of(wheel)}\n".encode())
    for patch in series.patches if series else []:
        h.update(patch.name.encode() + b"\0" + patch.read_bytes())
    return h.hexdigest()[:16]


def _head(tree: Path) -> str:
    return git.git(tree, "rev-parse", "HEAD", check=False).stdout.strip()


def _intact(tree: Path) -> bool:
    """Built to the end, still at the commit it was built at, and no tracked file changed since (a
    test may write only __pycache__)."""
    ready = tree / READY
    if not ready.is_file() or ready.read_text().strip() != _head(tree):
        return False
    status = git.git(tree, "status", "--porcelain", "--untracked-files=no", check=False)
    return status.returncode == 0 and not status.stdout.strip()


def cached_tree(cache: Path, name: str, wheel: Path, series: Series | None) -> Path:
    """The tree ``name`` (pristine when ``series`` is None) under ``cache``, built only when no intact
    tree of the same wheel and patches is there: a developer's fast lane rebuilds nothing while the
    patches stay the same, and CI, starting clean, builds once."""
    tree = cache / f"{name}-{_tree_key(wheel, series)}"
    if _intact(tree):
        return tree
    for stale in cache.glob(f"{name}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    building = cache / f".{tree.name}.{os.getpid()}"  # built aside, then renamed: no half tree is ever seen
    if series is None:
        unpack_pristine(wheel, building)
    else:
        build_tree(wheel, series, building)
    (building / READY).write_text(_head(building) + "\n")
    (building / ".git" / "info" / "exclude").write_text(READY + "\n")
    try:
        building.rename(tree)
    except OSError:  # another session finished the same tree first
        shutil.rmtree(building, ignore_errors=True)
    return tree


def build_trees(cache: Path) -> Trees:
    backport_dir = patches_dir() / "backport" / f"v{BACKPORT_VERSION}"
    parts = {
        "patched": (BASE_VERSION, read_series(patches_dir())),
        "pristine": (BASE_VERSION, None),
        "backport": (BACKPORT_VERSION, read_series(backport_dir)),
        "backport_pristine": (BACKPORT_VERSION, None),
        "upstream": (UPSTREAM.version, read_series(UPSTREAM.directory)),
        "upstream_pristine": (UPSTREAM.version, None),
    }
    return Trees(**{name: cached_tree(cache, name, fetch_pinned(version), series)
                    for name, (version, series) in parts.items()})


def source(tree: Path, module: str) -> Path:
    """``sglang.srt.x.y`` -> its file in ``tree``."""
    return tree / "python" / (module.replace(".", "/") + ".py")


@contextmanager
def _torchvision_stub():
    """A stand-in ``torchvision.io`` while SGLang modules import, if the real one cannot load."""
    try:
        importlib.import_module("torchvision.io")
        yield
        return
    except ImportError:
        pass
    tv = types.ModuleType("torchvision")
    tv.__path__ = []
    tv.__spec__ = importlib.machinery.ModuleSpec("torchvision", None, is_package=True)
    io = types.ModuleType("torchvision.io")
    io.__spec__ = importlib.machinery.ModuleSpec("torchvision.io", None)

    def decode_jpeg(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("torchvision stub (sglang-fastpath CPU tests)")

    io.decode_jpeg = decode_jpeg
    tv.io = io
    sys.modules.update({"torchvision": tv, "torchvision.io": io})
    try:
        yield
    finally:
        # Gone again, so that other tests' imports (transformers) see no torchvision.
        for name in ("torchvision", "torchvision.io"):
            sys.modules.pop(name, None)


def _is_sglang(name: str) -> bool:
    return name == "sglang" or name.startswith("sglang.")


class TreeImporter:
    """Point ``sys.modules['sglang...']`` at one tree at a time; ``restore`` undoes it."""

    current: Path | None = None
    _saved: dict[str, types.ModuleType] | None = None

    @classmethod
    def _drop(cls) -> None:
        for name in [n for n in sys.modules if _is_sglang(n)]:
            del sys.modules[name]
        if cls.current is not None:
            old = str(cls.current / "python")
            sys.path[:] = [p for p in sys.path if p != old]

    @classmethod
    def use(cls, tree: Path) -> None:
        if cls.current == tree:
            return
        if cls._saved is None:
            cls._saved = {n: m for n, m in sys.modules.items() if _is_sglang(n)}
        cls._drop()
        sys.path.insert(0, str(tree / "python"))
        package = types.ModuleType("sglang")
        package.__path__ = [str(tree / "python" / "sglang")]
        package.__spec__ = importlib.machinery.ModuleSpec("sglang", None, is_package=True)
        sys.modules["sglang"] = package
        cls.current = tree

    @classmethod
    def module(cls, tree: Path, name: str) -> types.ModuleType:
        cls.use(tree)
        with _torchvision_stub():
            return importlib.import_module(name)

    @classmethod
    def restore(cls) -> None:
        cls._drop()
        sys.modules.update(cls._saved or {})
        cls.current, cls._saved = None, None


def _import_table(module: ast.Module) -> dict[str, ast.stmt]:
    """Top-level name -> the import statement that binds it."""
    table: dict[str, ast.stmt] = {}
    for node in module.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                table[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                table[alias.asname or alias.name] = node
    return table


def _used_names(code: types.CodeType) -> set[str]:
    """Global names the code (and its nested functions and classes) reads."""
    names = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _used_names(const)
    return names


def _find_def(module: ast.Module, name: str) -> ast.stmt:
    scope, _, attr = name.partition(".")
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == scope:
            if not attr:
                return node
            assert isinstance(node, ast.ClassDef), f"{scope} is not a class"
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == attr:
                    return item
    raise LookupError(f"{name} not found")


_PARSED: dict[tuple[str, int, int], tuple[ast.Module, dict[str, ast.stmt]]] = {}


def _parsed(path: Path) -> tuple[ast.Module, dict[str, ast.stmt]]:
    """``path``'s syntax tree and import table, parsed once per file version (SGLang's large modules
    take a tenth of a second each to parse, and the validation tests load them per test)."""
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        module = ast.parse(path.read_text(), filename=str(path))
        _PARSED[key] = (module, _import_table(module))
    return _PARSED[key]


def load_defs(path: Path, names: list[str], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Execute the definitions ``names`` of ``path``; return them by name.

    Decorators are kept; annotations are not evaluated (``from __future__
    import annotations``). A name a definition uses is bound from ``extra``
    first, else by running the module's own import for it (the tree must be
    active in ``TreeImporter`` if that import is from ``sglang``).
    """
    module, imports = _parsed(path)
    namespace: dict[str, Any] = {"__name__": f"defs_of_{path.stem}", **(extra or {})}
    nodes = [_find_def(module, name) for name in names]
    tree = ast.Module(body=nodes, type_ignores=[])
    code = compile(ast.fix_missing_locations(tree), str(path), "exec", flags=annotations_flag())
    for name in sorted(_used_names(code)):
        if name in namespace or name not in imports:
            continue
        stmt = imports[name]
        with _torchvision_stub():
            exec(compile(ast.Module(body=[stmt], type_ignores=[]), str(path), "exec"), namespace)
    exec(code, namespace)
    # A method is defined at the top level of the namespace, under its own name.
    return {name: namespace[node.name] for name, node in zip(names, nodes)}


def find_def(tree: Path, module: str, name: str) -> ast.stmt:
    """The syntax-tree node of ``name`` (a top-level function or class, or ``Class.method``) in ``module`` of
    ``tree``, from the cached parse."""
    return _find_def(_parsed(source(tree, module))[0], name)


def tree_defs(tree: Path, module: str, names: list[str], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """``load_defs`` of ``module`` in ``tree``, after asserting the tree defines every name (a release without the
    patch fails that assertion, so its tests xfail under ``SHOWS_THE_BUG``), with ``tree`` as the importer's."""
    text = source(tree, module).read_text()
    for name in names:
        assert f"def {name.rpartition('.')[2]}(" in text, f"{module} has no {name}"
    TreeImporter.use(tree)
    return load_defs(source(tree, module), names, extra=extra)


def env_flag(value: Any) -> Any:
    """A stand-in for an ``envs.SGLANG_*`` flag: ``.get()`` returns ``value``."""
    return types.SimpleNamespace(get=lambda: value)


def assert_switch_default(tree: Path, name: str, monkeypatch: pytest.MonkeyPatch, default: bool = False) -> None:
    """``envs.<name>`` of ``tree`` exists, reads ``default`` unset and the other value once set to 1 (or 0)."""
    monkeypatch.delenv(name, raising=False)
    envs = TreeImporter.module(tree, "sglang.srt.environ").envs
    assert hasattr(envs, name)
    assert getattr(envs, name).get() is default
    monkeypatch.setenv(name, "0" if default else "1")
    assert getattr(envs, name).get() is not default


def annotations_flag() -> int:
    import __future__

    return __future__.annotations.compiler_flag


_built: Trees | None = None


@pytest.fixture(scope="module")
def trees():
    """The trees, checked (or built) once per session in ``build/cache/trees``; each test module's
    SGLang imports undone after it."""
    global _built
    if _built is None:
        _built = build_trees(build_dir() / "cache" / "trees")
    yield _built
    TreeImporter.restore()

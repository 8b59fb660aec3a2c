"""``bundle --jit-cache``: SGLang's prebuilt JIT kernels in the bundle's ``jit-cache/``, and the install seeding
the host's TVM-FFI cache with them.

The bundle is made by the real ``build_bundle`` with its wheel steps stubbed (the fork wheel, the plan and its
downloads, the stock overlay and the tool wheel are built for real, with the network, in test_bundle.py): a
stand-in sglang wheel and the tree's ``sglang_fastpath`` packed as the tool wheel. The install is that bundle's
own install.sh, with its real pip command (``--no-index``, ``--cross``: the bundle is for Python 3.12) and every
proxy pointed at a closed port, into a temporary site and a temporary ``TVM_FFI_CACHE_DIR``.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from fastpath_fixtures import make_wheel

from sglang_fastpath import __version__
from sglang_fastpath.bundle import build
from sglang_fastpath.bundle.build import BundleOptions
from sglang_fastpath.bundle.jit_cache import collect_kernels, find_kernels, parse_build_dir
from sglang_fastpath.bundle.plan import Plan
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.install.jit_cache import seed_jit_cache
from sglang_fastpath.pins import fastpath_version
from sglang_fastpath.wheel.build import BuiltWheel

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "sglang_fastpath"
FORK = fastpath_version()
MODULE = "sgl_kernel_jit_moe_wna16_marlin_bf16_t_false_false_c52b0190dd8e317a"
MARLIN = f"{MODULE}__arch_9.0a__tvmffi_0.1.11"  # the name SGLang 0.5.17 gives the Marlin MoE build on an H200
OTHER = "sgl_kernel_jit_other_0123456789abcdef__arch_12.0a__tvmffi_0.1.11"
OFFLINE = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
           "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}


def _so(name: str) -> str:
    return name.split("__arch_")[0] + ".so"


def _cache(folder: Path, *builds: str, payload: bytes = b"") -> Path:
    """A TVM-FFI cache folder: each build folder with its ninja files, an object file and ``<module>.so``."""
    for name in builds:
        (folder / name).mkdir(parents=True)
        for member in ("build.ninja", ".ninja_log", "lock", "cuda_0.o"):
            (folder / name / member).write_text("build file\n")
        (folder / name / _so(name)).write_bytes(b"\x7fELF stand-in for " + name.encode() + payload)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _tool_wheel(dest: Path) -> Path:
    """The tree's sglang_fastpath as the bundle's tool wheel: what install.sh runs the installer from."""
    files = {p.relative_to(PACKAGE.parent).as_posix(): p.read_bytes() for p in sorted(PACKAGE.rglob("*"))
             if p.is_file() and "__pycache__" not in p.parts}
    return make_wheel(dest, "sglang_fastpath", __version__, files)


@pytest.fixture
def make_bundle(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., build.Bundle]:
    """``make_bundle(out, *jit_caches)``: build_bundle with a stand-in fork wheel and no downloads."""
    fork = BuiltWheel(make_wheel(tmp_path / "fork", "sglang", FORK, {
        "sglang/__init__.py": b"", f"sglang-{FORK}.dist-info/fastpath.json": json.dumps({"version": FORK}).encode(),
    }), FORK, [])
    monkeypatch.setattr(build, "build_wheels", lambda cache, tags: [fork])
    monkeypatch.setattr(build, "_plan", lambda opts, fork, cache: (Plan({"sglang": FORK}), {"sglang": fork.path}, {}))
    monkeypatch.setattr(build, "_stock_overlay", lambda fork, dest: dest.mkdir(parents=True) or {})
    monkeypatch.setattr(build, "_tool_wheel", _tool_wheel)
    return lambda out, *caches: build.build_bundle(BundleOptions(out, "full", cache=tmp_path / "cache",
                                                                 jit_cache=caches))


def _install(bundle: Path, site: Path, cache: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **OFFLINE, "PYTHON": sys.executable, "TVM_FFI_CACHE_DIR": str(cache)}
    return subprocess.run(["bash", str(bundle / "install.sh"), "--cross", *flags, str(site)], capture_output=True,
                          text=True, env=env, timeout=120)


def test_build_dir_names_parse_like_sglangs() -> None:
    assert parse_build_dir(MARLIN) == (MODULE, "9.0a", "0.1.11")
    assert parse_build_dir("sgl_kernel_jit_a__b__arch_12.0a__tvmffi_0.1.11") == ("sgl_kernel_jit_a__b", "12.0a",
                                                                                  "0.1.11")
    assert parse_build_dir("torch_extensions") is None and parse_build_dir(f"{MODULE}__arch_9.0a") is None


def test_bundle_ships_each_kernels_so_with_its_manifest_entry_and_sum(make_bundle, tmp_path: Path) -> None:
    cache = _cache(tmp_path / "tvm-ffi", MARLIN, OTHER)
    (cache / "unrelated").mkdir()  # neither folder is a kernel: skipped
    (cache / "unrelated" / "unrelated.so").write_bytes(b"x")
    (cache / f"{MODULE}x__arch_9.0a__tvmffi_0.1.11").mkdir()  # a build that never finished: no .so
    bundle = make_bundle(tmp_path / "out", cache)
    shipped = sorted(p.relative_to(bundle.out).as_posix() for p in (bundle.out / "jit-cache").rglob("*"))
    assert shipped == [f"jit-cache/{MARLIN}", f"jit-cache/{MARLIN}/{_so(MARLIN)}.xz",  # the .so only, no
                       f"jit-cache/{OTHER}", f"jit-cache/{OTHER}/{_so(OTHER)}.xz"]  # build files; xz-compressed
    data = (cache / MARLIN / _so(MARLIN)).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    stored = bundle.out / "jit-cache" / MARLIN / f"{_so(MARLIN)}.xz"
    assert lzma.decompress(stored.read_bytes()) == data
    assert bundle.manifest["jit_cache"][0] == {"dir": MARLIN, "file": _so(MARLIN), "stored": f"{_so(MARLIN)}.xz",
                                               "bytes": len(data), "sha256": digest, "arch": "9.0a",
                                               "tvmffi": "0.1.11"}
    assert [k["arch"] for k in bundle.manifest["jit_cache"]] == ["9.0a", "12.0a"]
    stored_digest = hashlib.sha256(stored.read_bytes()).hexdigest()
    assert f"{stored_digest}  jit-cache/{MARLIN}/{_so(MARLIN)}.xz\n" in (bundle.out / "SHA256SUMS").read_text()
    entry = {"path": f"jit-cache/{MARLIN}/{_so(MARLIN)}.xz", "sha256": stored_digest, "size": stored.stat().st_size}
    assert entry in bundle.manifest["files"]


def test_a_rebuild_without_jit_cache_drops_the_kernels(make_bundle, tmp_path: Path) -> None:
    make_bundle(tmp_path / "out", _cache(tmp_path / "tvm-ffi", MARLIN))
    again = make_bundle(tmp_path / "out")
    assert not (again.out / "jit-cache").exists() and again.manifest["jit_cache"] == []
    assert "jit-cache/" not in (again.out / "SHA256SUMS").read_text()


@pytest.mark.parametrize("case, message", [
    ("missing", "no such folder"),
    ("empty", "holds no prebuilt kernel"),
    ("no .so", "holds no prebuilt kernel"),
    ("a build folder itself", "give its parent folder"),
])
def test_a_folder_without_a_kernel_is_refused_before_the_bundle_is_touched(make_bundle, tmp_path: Path, case: str,
                                                                           message: str) -> None:
    cache = tmp_path / "tvm-ffi"
    if case == "empty":
        cache.mkdir()
    elif case == "no .so":
        _cache(cache, MARLIN)
        (cache / MARLIN / _so(MARLIN)).unlink()
    elif case == "a build folder itself":
        cache = _cache(cache, MARLIN) / MARLIN
    previous = make_bundle(tmp_path / "out")
    with pytest.raises(FastpathError, match=message):
        make_bundle(tmp_path / "out", cache)
    assert json.loads((tmp_path / "out" / "manifest.json").read_text()) == previous.manifest  # left as it was


def test_the_cli_refuses_a_missing_jit_cache_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "sglang_fastpath", "bundle", "--out", str(tmp_path / "out"),
                           "--jit-cache", str(tmp_path / "nope")], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--jit-cache" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


def test_several_caches_merge_and_one_kernel_built_twice_must_agree(tmp_path: Path) -> None:
    first, second = _cache(tmp_path / "a", MARLIN), _cache(tmp_path / "b", MARLIN, OTHER)
    assert [k.dir for k in collect_kernels((first, second))] == [MARLIN, OTHER]
    third = _cache(tmp_path / "c", MARLIN, payload=b" rebuilt")
    with pytest.raises(FastpathError, match=f"{MARLIN} differs"):
        collect_kernels((first, third))
    assert [k.so for k in find_kernels(first)] == [first / MARLIN / _so(MARLIN)]


def test_install_seeds_the_jit_cache_without_overwriting_and_skips_it_on_request(make_bundle, tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle", _cache(tmp_path / "tvm-ffi", MARLIN, OTHER)).out
    host_cache = tmp_path / "host-cache"
    skipped = _install(bundle, tmp_path / "site-a", host_cache, "--no-jit-cache")
    assert skipped.returncode == 0, skipped.stderr
    assert "JIT cache" not in skipped.stdout + skipped.stderr and not host_cache.exists()

    (host_cache / OTHER).mkdir(parents=True)
    (host_cache / OTHER / _so(OTHER)).write_bytes(b"built on this host")  # never overwritten
    proc = _install(bundle, tmp_path / "site-b", host_cache)
    assert proc.returncode == 0, proc.stderr
    installed, seeded = proc.stdout.splitlines()[-2:]
    assert installed.startswith(f"install: 2 wheels installed into {tmp_path / 'site-b'}"), proc.stdout
    assert seeded == f"install: JIT cache: seeded 1 kernel into {host_cache} (1 already there)"
    assert (tmp_path / "site-b" / f"sglang-{FORK}.dist-info" / "fastpath.json").is_file()
    shipped = bundle / "jit-cache" / MARLIN / f"{_so(MARLIN)}.xz"
    assert (host_cache / MARLIN / _so(MARLIN)).read_bytes() == lzma.decompress(shipped.read_bytes())
    assert (host_cache / OTHER / _so(OTHER)).read_bytes() == b"built on this host"
    assert sorted(p.name for p in (host_cache / MARLIN).iterdir()) == [_so(MARLIN)]  # no partial file left


def test_a_bundle_without_kernels_seeds_nothing(make_bundle, tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle").out
    assert seed_jit_cache(bundle, json.loads((bundle / "manifest.json").read_text())["jit_cache"]) is None


def test_a_cache_that_cannot_be_written_is_a_warning_not_an_error(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    (bundle / "jit-cache" / MARLIN).mkdir(parents=True)
    data = b"\x7fELF stand-in"
    (bundle / "jit-cache" / MARLIN / f"{_so(MARLIN)}.xz").write_bytes(lzma.compress(data))
    digest = hashlib.sha256(data).hexdigest()
    entries = [{"dir": MARLIN, "file": _so(MARLIN), "sha256": digest}, {"dir": "..", "file": "evil.so"}]
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    seed = seed_jit_cache(bundle, entries, blocked / "tvm-ffi")
    assert (seed.seeded, seed.present, len(seed.failed)) == (0, 0, 2)
    assert seed.line.endswith("(0 already there, 2 failed)")
    assert seed.warning.startswith(f"could not seed the JIT cache {blocked / 'tvm-ffi'} ({MARLIN}/{_so(MARLIN)}: ")
    assert "and 1 more" in seed.warning and "../evil.so: not a plain folder and file name" in seed.failed[1]


def test_a_kernel_that_does_not_match_its_sum_is_not_seeded(tmp_path: Path) -> None:
    bundle, cache = tmp_path / "bundle", tmp_path / "cache"
    (bundle / "jit-cache" / MARLIN).mkdir(parents=True)
    (bundle / "jit-cache" / MARLIN / f"{_so(MARLIN)}.xz").write_bytes(lzma.compress(b"corrupted on the way"))
    seed = seed_jit_cache(bundle, [{"dir": MARLIN, "file": _so(MARLIN), "sha256": "0" * 64}], cache)
    assert (seed.seeded, len(seed.failed)) == (0, 1) and "does not match its manifest sha256" in seed.failed[0]
    assert list((cache / MARLIN).iterdir()) == []  # neither the file nor a partial one

"""``sglang-fastpath bundle``: the slim wheelhouse, its installer, and the planning behind it.

The slim bundle is built once per module from a series of two real patches (an edit and
an added file), so the stock overlay is exercised. Downloads (~450 MB, sglang-kernel is
365 MB) are cached under build/cache/bundle. The cp312 wheels cannot be imported on this
cp311 machine: install.sh runs its real pip command (``--no-index`` plus the host's tags,
``--cross``) with every proxy pointed at a closed port, and the tests read the installed
files and metadata. Importing the installed site is checked on a GPU host only
(``test_installed_site_imports``, via test/gpu/run_on_device.sh).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from fastpath_fixtures import REPO, find_python, make_project
from packaging.utils import canonicalize_name

from sglang_fastpath.series import git
from sglang_fastpath.bundle.build import BundleOptions, build_bundle
from sglang_fastpath.bundle.host_pip import Dist
from sglang_fastpath.bundle.plan import full_plan, slim_plan
from sglang_fastpath.bundle.profiles import SLIM_BUDGET_BYTES, SLIM_PACKAGES, LineEdit, Trim
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.series.export import export_series
from sglang_fastpath.fetch import fetch_pinned
from sglang_fastpath.bundle.host_manifest import DEFAULT_HOST, parse_host_manifest
from sglang_fastpath.pins import BASE_VERSION, fastpath_version
from sglang_fastpath.series.source import make_source
from sglang_fastpath.wheel.archive import verify_record
from sglang_fastpath.wheel.trim import MARKER, trim_wheel

EDITED = "sglang/srt/utils/__init__.py"
ADDED = "sglang/srt/fastpath_bundle_marker.py"
OFFLINE = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
           "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("bundle")
    with pytest.MonkeyPatch.context() as mp:
        root = make_project(tmp)
        mp.setenv("SGLANG_FASTPATH_ROOT", str(root))
        mp.setenv("SGLANG_FASTPATH_WHEEL_CACHE", str(REPO / "build" / "cache" / "wheels"))
        tree = make_source()
        with open(tree / "python" / EDITED, "a") as f:
            f.write("\n# fastpath bundle test edit\n")
        (tree / "python" / ADDED).write_text("MARKER = 'bundle'\n")
        git.git(tree, "add", "-A")
        git.git(tree, "commit", "-q", "-m", "Bundle test\n\nProblem: test. Fix: test.", date="2026-11-30T00:00:00+0000")
        export_series()
        yield build_bundle(BundleOptions(tmp / "out", cache=REPO / "build" / "cache" / "bundle"))


def _wheels(out: Path) -> dict[str, Path]:
    return {canonicalize_name(p.name.split("-")[0]): p for p in (out / "wheels").glob("*.whl")}


def _install(bundle_dir: Path, site: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(bundle_dir / "install.sh"), *flags, str(site)], capture_output=True, text=True,
                          env={**os.environ, **OFFLINE, "PYTHON": sys.executable})


def _metadata_version(site: Path, name: str) -> str:
    dists = list(importlib.metadata.distributions(name=name, path=[str(site)]))
    assert len(dists) == 1, dists
    return dists[0].version


@pytest.mark.network
def test_slim_fits_one_device_call(bundle) -> None:
    on_disk = sum(p.stat().st_size for p in bundle.out.rglob("*") if p.is_file())
    assert bundle.total_bytes == on_disk
    assert on_disk < SLIM_BUDGET_BYTES, f"{on_disk / 2**20:.1f} MiB"
    assert bundle.fits_device


@pytest.mark.network
def test_every_wheel_has_a_valid_record_and_trimmed_ones_say_so(bundle) -> None:
    wheels = _wheels(bundle.out)
    for path in wheels.values():
        assert verify_record(path) == [], path.name
    trimmed = {canonicalize_name(t["wheel"].split("-")[0]): t for t in bundle.manifest["trimmed"]}
    assert set(trimmed) == {"sglang", "sglang-kernel", "flashinfer-python", "xgrammar"}
    for name, entry in trimmed.items():
        with zipfile.ZipFile(wheels[name]) as zf:
            marker = next(n for n in zf.namelist() if n.endswith(f".dist-info/{MARKER}"))
            assert json.loads(zf.read(marker))["upstream_sha256"] == entry["upstream_sha256"]
    assert "+slim.sm90-" in wheels["sglang-kernel"].name and "+slim-" in wheels["xgrammar"].name
    assert wheels["sglang"].name == f"sglang-{fastpath_version()}-1slim-cp312-cp312-manylinux_2_34_x86_64.whl"


@pytest.mark.network
def test_slim_drops_what_it_says_and_keeps_sm90_ops(bundle) -> None:
    names = {n: zipfile.ZipFile(p).namelist() for n, p in _wheels(bundle.out).items()}
    kernel = names["sglang-kernel"]
    assert "sgl_kernel/sm90/common_ops.abi3.so" in kernel
    assert not [n for n in kernel if n.startswith("sgl_kernel/sm100/") or "flash_ops" in n or "infllm_ops" in n]
    assert not [n for n in names["flashinfer-python"] if n.startswith("flashinfer/data/")]
    assert not [n for n in names["sglang"] if n.startswith("sglang/multimodal_gen/") or "/_core." in n]
    assert "sglang/srt/entrypoints/engine.py" in names["sglang"]
    with zipfile.ZipFile(_wheels(bundle.out)["sglang-kernel"]) as zf:
        for member in ("sgl_kernel/elementwise.py", "sgl_kernel/sampling.py"):
            assert "_has_flashinfer = False  # sglang-fastpath slim" in zf.read(member).decode()
    kernel_entry = next(t for t in bundle.manifest["trimmed"] if t["wheel"].startswith("sglang_kernel"))
    assert "sgl_kernel/flash_ops.abi3.so" in kernel_entry["dropped"]


@pytest.mark.network
def test_manifest_lists_every_file_and_what_the_host_keeps(bundle) -> None:
    m = bundle.manifest
    assert m["profile"] == "slim" and m["arches"] == ["sm90"]
    on_disk = {p.relative_to(bundle.out).as_posix(): p for p in bundle.out.rglob("*") if p.is_file()}
    listed = {f["path"]: f for f in m["files"]}
    assert set(listed) == set(on_disk) - {"manifest.json", "SHA256SUMS"}
    for path, entry in listed.items():
        data = on_disk[path].read_bytes()
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (entry["sha256"], entry["size"]), path
    sums = dict(line.split("  ")[::-1] for line in (bundle.out / "SHA256SUMS").read_text().splitlines())
    assert sums == {p: f["sha256"] for p, f in listed.items()}
    assert {w["file"] for w in m["wheels"]} == {p for p in listed if p.startswith("wheels/")}
    shipped = {w["project"]: w["version"] for w in m["wheels"]}
    # The image's transformers 5.17.0 and tokenizers 0.23.2 violate sglang's pins: shipped.
    assert shipped["transformers"] == "5.12.1" and shipped["tokenizers"] == "0.22.2"
    assert set(shipped) == {canonicalize_name(p.name) for p in SLIM_PACKAGES} | {"sglang", "sglang-fastpath"}
    assert m["left_to_host"]["torch"] == "2.11.0" and "triton" in m["left_to_host"]
    assert "tilelang" in m["not_shipped"] and "torch" not in m["not_shipped"]


@pytest.mark.network
def test_patched_sglang_and_stock_overlay(bundle) -> None:
    m = bundle.manifest
    assert m["sglang"]["version"] == fastpath_version()
    assert sorted(m["sglang"]["patched_files"]) == sorted([EDITED, ADDED])
    with zipfile.ZipFile(_wheels(bundle.out)["sglang"]) as zf:
        assert zf.read(EDITED).decode().endswith("# fastpath bundle test edit\n")
        assert f"Version: {fastpath_version()}\n" in zf.read(f"sglang-{fastpath_version()}.dist-info/METADATA").decode()
    with zipfile.ZipFile(fetch_pinned(BASE_VERSION, "cp312")) as zf:
        assert (bundle.out / "stock-overlay" / "files" / EDITED).read_bytes() == zf.read(EDITED)
    assert (bundle.out / "stock-overlay" / "REMOVE").read_text() == f"{ADDED}\n"


@pytest.mark.network
def test_install_fork_and_stock_sites_offline(bundle, tmp_path: Path) -> None:
    fork, stock = tmp_path / "site-fork", tmp_path / "site-stock"
    for site, flags in ((fork, ["--cross"]), (stock, ["--cross", "--stock"])):
        proc = _install(bundle.out, site, *flags)
        assert proc.returncode == 0, proc.stderr
    assert _metadata_version(fork, "sglang") == fastpath_version()
    assert _metadata_version(fork, "transformers") == "5.12.1"
    assert _metadata_version(fork, "sglang-kernel") == "0.4.5+slim.sm90"
    assert (fork / "sgl_kernel/sm90/common_ops.abi3.so").is_file() and not (fork / "sgl_kernel/sm100").exists()
    assert (fork / ADDED).is_file() and (fork / EDITED).read_text().endswith("# fastpath bundle test edit\n")
    assert _metadata_version(stock, "sglang") == BASE_VERSION
    assert not (stock / ADDED).exists()
    assert (stock / EDITED).read_bytes() == (bundle.out / "stock-overlay/files" / EDITED).read_bytes()
    assert (stock / f"sglang-{BASE_VERSION}.dist-info" / "STOCK").is_file()
    again = _install(bundle.out, fork, "--cross")  # reinstalling over a site works
    assert again.returncode == 0, again.stderr


@pytest.mark.network
def test_install_refuses_tampered_bundle_and_wrong_python(bundle, tmp_path: Path) -> None:
    copy = tmp_path / "bundle"
    shutil.copytree(bundle.out, copy)
    with open(copy / "stock-overlay" / "REMOVE", "a") as f:
        f.write("sglang/__init__.py\n")
    proc = _install(copy, tmp_path / "site", "--cross")
    assert proc.returncode == 1 and "SHA256SUMS" in proc.stderr
    assert not (tmp_path / "site" / "sglang").exists()
    if sys.version_info[:2] != (3, 12):
        proc = _install(bundle.out, tmp_path / "site")
        assert proc.returncode == 2 and "Python 3.12" in proc.stderr


@pytest.mark.network
def test_demo_sh_installs_the_bundle_for_the_hosts_python_and_stops_without_a_gpu(bundle, tmp_path: Path) -> None:
    """The air-gapped main job: `demo.sh --bundle`, with the bundle's Python and no GPU (the device runs the rest)."""
    python = find_python(bundle.manifest["target"]["python"])
    if python is None:
        pytest.skip(f"no Python {bundle.manifest['target']['python']} here: demo.sh --bundle installs for the bundle's "
                    "Python (the --cross install above checks the same wheels)")
    site = tmp_path / "site"
    env = {**os.environ, **OFFLINE, "SGLANG_FASTPATH_ENV": str(site), "SGLANG_FASTPATH_PYTHON": python,
           "SGLANG_FASTPATH_NVIDIA_SMI": "no-such-nvidia-smi"}
    proc = subprocess.run(["bash", str(REPO / "demo.sh"), "--bundle", str(bundle.out)], capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert lines[-2].startswith(f"install: {len(bundle.manifest['wheels'])} wheels installed into {site}"), lines[-2]
    assert lines[-1].startswith("demo.sh: no GPU here") and "installed from the bundle" in lines[-1], lines[-1]
    assert _metadata_version(site, "sglang") == fastpath_version()
    assert (site / "sgl_kernel/sm90/common_ops.abi3.so").is_file() and (site / ADDED).is_file()


def _dist(name: str, version: str, *requires: str) -> Dist:
    return Dist(canonicalize_name(name), version, requires)


def test_host_manifest_parsing_and_satisfaction(tmp_path: Path) -> None:
    from packaging.specifiers import SpecifierSet

    host = parse_host_manifest(DEFAULT_HOST)
    assert str(host.version("torch")) == "2.11.0" and host.has("numba") and host.version("numba") is None
    assert not host.satisfies("transformers", [SpecifierSet("==5.12.1")])
    assert host.satisfies("numba", [SpecifierSet("==0.65.1")])  # version unknown: trusted
    bad = tmp_path / "host.txt"
    bad.write_text("torch==2.11.0\nnumpy>=2\n")
    with pytest.raises(FastpathError, match=r"host.txt:2"):
        parse_host_manifest(bad)


def test_full_plan_ships_what_the_host_lacks(tmp_path: Path) -> None:
    manifest = tmp_path / "host.txt"
    manifest.write_text("torch==2.11.0\nnumpy==2.5.2\ntokenizers==0.23.2\nrequests\n")
    host = parse_host_manifest(manifest)
    dists = {d.name: d for d in (
        _dist("sglang", "1.0", "torch==2.11.0", "transformers==5.12.1", "fastapi", "numpy",
              "windows-only; sys_platform == 'win32'", "extra-dep; extra == 'diffusion'"),
        _dist("torch", "2.11.0", "nvidia-cublas"),  # on the host: its dependencies are not walked
        _dist("nvidia-cublas", "13.0"),
        _dist("transformers", "5.12.1", "tokenizers<=0.23.0", "requests"),
        _dist("tokenizers", "0.22.2"),
        _dist("fastapi", "0.135.0", "starlette[full]>=1", "numba==0.65.1"),
        _dist("starlette", "1.10.0", "itsdangerous; extra == 'full'"),
        _dist("itsdangerous", "2.2.0"),
        # numba pins numpy below the host's 2.5.2, so numpy is shipped too once numba is.
        _dist("numba", "0.65.1", "numpy<2.4"),
        _dist("numpy", "2.3.5"),
    )}
    plan = full_plan("sglang", dists, host)
    assert set(plan.ship) == {"sglang", "transformers", "tokenizers", "fastapi", "starlette", "itsdangerous",
                              "numba", "numpy"}
    assert plan.on_host == {"torch": "2.11.0", "requests": "version unknown"}
    assert plan.conflicts == [] and plan.unmet == {}


def test_slim_plan_reports_conflicts_and_unmet(tmp_path: Path) -> None:
    manifest = tmp_path / "host.txt"
    manifest.write_text("numpy==2.5.2\npydantic==2.14.4\n")
    host = parse_host_manifest(manifest)
    dists = {d.name: d for d in (_dist("sglang", "1.0", "gguf", "anthropic", "pydantic"),
                                 _dist("gguf", "0.19.0", "numpy<2"), _dist("pydantic", "2.14.4"))}
    plan = slim_plan("sglang", dists, host)
    assert set(plan.ship) == {"sglang", "gguf"}  # pydantic: the host's version is the one wanted
    assert plan.unmet == {"anthropic": ["sglang: anthropic"]}
    assert plan.conflicts == ["gguf: numpy<2 but the host has numpy 2.5.2"]


def _toy_wheel(tmp_path: Path) -> Path:
    path = tmp_path / "toy-1.0-py3-none-any.whl"
    files = {"toy/__init__.py": "    flag = True\n", "toy/big/data.bin": "x" * 1000, "toy/lib.so": "ELF",
             "toy-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: toy\nVersion: 1.0\n\nReadme.\n",
             "toy-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nTag: py3-none-any\n"}
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
        zf.writestr("toy-1.0.dist-info/RECORD", "")
    return path


def test_trim_wheel_relabels_and_rewrites_record(tmp_path: Path) -> None:
    trim = Trim("toy", "test", drop=("toy/big/*",), edits=(LineEdit("toy/__init__.py", "    flag = True", "    flag = 0"),),
                local="slim")
    result = trim_wheel(_toy_wheel(tmp_path), trim, tmp_path / "out")
    assert result.path.name == "toy-1.0+slim-py3-none-any.whl" and verify_record(result.path) == []
    assert result.dropped == ["toy/big/data.bin"] and result.by_pattern == {"toy/big/*": [1, 1000]}
    with zipfile.ZipFile(result.path) as zf:
        assert zf.read("toy/__init__.py") == b"    flag = 0\n"
        assert zf.read("toy-1.0+slim.dist-info/METADATA").decode().splitlines()[:3] == [
            "Metadata-Version: 2.1", "Name: toy", "Version: 1.0+slim"]
    tagged = trim_wheel(_toy_wheel(tmp_path), Trim("toy", "test", drop=("toy/big/*",), build_tag="1slim"),
                        tmp_path / "tagged")
    assert tagged.path.name == "toy-1.0-1slim-py3-none-any.whl" and verify_record(tagged.path) == []
    assert "Build: 1slim" in zipfile.ZipFile(tagged.path).read("toy-1.0.dist-info/WHEEL").decode()
    with pytest.raises(FastpathError, match="layout changed"):
        trim_wheel(_toy_wheel(tmp_path), Trim("toy", "test", drop=("toy/gone/*",)), tmp_path / "bad")


def test_cli_refuses_arch_for_full() -> None:
    proc = subprocess.run([sys.executable, "-m", "sglang_fastpath", "bundle", "--out", "x", "--profile", "full",
                           "--arch", "sm90"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--arch" in proc.stderr


@pytest.mark.gpu
def test_installed_site_imports() -> None:
    """On a GPU host, with PYTHONPATH=/tmp/site-fork (test/gpu/run_on_device.sh): the slim site works."""
    import torch

    import sgl_kernel
    import sglang.srt.entrypoints.engine  # noqa: F401

    assert "+fastpath." in importlib.metadata.version("sglang")
    want = "sm90" if torch.cuda.get_device_capability() == (9, 0) else "sm100"
    assert f"/{want}/" in sgl_kernel.common_ops.__file__
    if "+slim" in importlib.metadata.version("sglang-kernel"):
        from sgl_kernel import elementwise

        assert elementwise._has_flashinfer is False

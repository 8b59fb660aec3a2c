"""Data for ``sglang-fastpath bundle``: the target host, the slim package set and what slim trims.

Everything here was learned on H200 hosts running SGLang 0.5.17 offline (torch 2.11
cu130, triton 3.6.0, Python 3.12) and from reading the wheels named; the reasons are
kept next to each entry so that a change of pin can be judged against them.
"""

from __future__ import annotations

from dataclasses import dataclass

PROFILES = ("slim", "full")
DEFAULT_PROFILE = "slim"

# The GPU hosts: CPython 3.12 on x86_64 Linux (Ubuntu 24.04, glibc 2.39).
TARGET_PYTHON = "3.12"
TARGET_PLATFORMS: tuple[str, ...] = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(39, 4, -1)),
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
)
# Marker values of that interpreter, for evaluating Requires-Dist on this (other) machine.
TARGET_MARKERS: dict[str, str] = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "implementation_version": "3.12.3",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
}

# One device call carries at most 64 MiB, repository included: 2.7 MiB of it with benchmark/results
# hidden (test/gpu/device_tree.sh), so a slim bundle with the sm_90a Marlin kernel (60.4 MiB) still travels.
SLIM_BUDGET_BYTES = 61 * 1024 * 1024

# sgl_kernel 0.4.5 (load_utils._load_architecture_specific_ops) loads sm90/common_ops on
# compute capability 9.0 and sm100/common_ops on every other GPU, sm_120 included; both
# builds carry SASS for sm80, 89, 90, 100, 103 and 120 (sm90's is the fast-math one).
ARCHES = ("sm90", "sm120")
DEFAULT_ARCHES = ("sm90",)
SGL_KERNEL_OPS_DIR = {"sm90": "sgl_kernel/sm90/", "sm120": "sgl_kernel/sm100/"}


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    why: str

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


# What an LLM server with Triton attention imports on the H200 image, beside sglang itself;
# versions that resolve together (checked with an offline Engine + EAGLE-3 run on H200).
SLIM_PACKAGES: tuple[Pin, ...] = (
    Pin("sglang-kernel", "0.4.5", "sgl_kernel ops (rmsnorm, rope, sampling, allreduce); trimmed"),
    Pin("flashinfer-python", "0.6.15.post1", "imported on CUDA even when unused (fp8_utils); trimmed"),
    Pin("transformers", "5.12.1", "sglang's pin; the image's 5.17 clashes ('qwen3_asr' already registered)"),
    Pin("tokenizers", "0.22.2", "transformers 5.12.1 needs <=0.23.0; the image has 0.23.2"),
    Pin("xgrammar", "0.2.1", "imported at module level by the function-call parser; trimmed"),
    Pin("apache-tvm-ffi", "0.1.11", "xgrammar and sglang's JIT kernels"),
    Pin("sgl-deep-gemm", "0.1.5.post1", "EAGLE's CUDA-graph setup imports dsa_backend, which imports deep_gemm"),
    Pin("openai", "2.6.1", "OpenAI-compatible entrypoints"),
    Pin("jiter", "0.19.0", "openai"),
    Pin("distro", "1.9.0", "openai"),
    Pin("sniffio", "1.3.1", "openai"),
    Pin("pydantic", "2.14.4", "request/response models"),
    Pin("pydantic-core", "2.50.5", "pydantic"),
    Pin("annotated-types", "0.8.0", "pydantic"),
    Pin("typing-inspection", "0.4.5", "pydantic"),
    Pin("fastapi", "0.135.0", "HTTP server (imported by the engine entrypoint)"),
    Pin("starlette", "1.10.0", "fastapi"),
    Pin("uvicorn", "0.54.0", "HTTP server"),
    Pin("python-multipart", "0.0.34", "sglang requires it; fastapi form/file endpoints of the HTTP server"),
    Pin("soundfile", "0.13.1", "sglang's pin; launch_server imports it (OpenAI realtime entrypoint)"),
    Pin("cffi", "2.1.1", "soundfile"),
    Pin("pycparser", "3.12", "cffi"),
    Pin("jsonschema", "4.26.0", "launch_server: the OpenAI chat entrypoint imports it"),
    Pin("jsonschema-specifications", "2025.9.1", "jsonschema"),
    Pin("referencing", "0.37.0", "jsonschema"),
    Pin("rpds-py", "2026.9.1", "jsonschema (referencing)"),
    Pin("compressed-tensors", "0.20.1", "quantization config parsing"),
    Pin("loguru", "0.7.3", "imported by sglang modules"),
    Pin("gguf", "0.19.0", "model loader"),
    Pin("orjson", "3.13.0", "serialization"),
    Pin("pybase64", "1.5.1", "serialization"),
    Pin("pyzmq", "27.3.0", "scheduler <-> tokenizer IPC"),
    Pin("msgspec", "0.23.0", "IPC structs"),
    Pin("setproctitle", "1.3.8", "subprocess names"),
    Pin("partial-json-parser", "0.2.1.1.post7", "function-call parser"),
    Pin("dill", "0.4.1", "imported by sglang modules"),
    Pin("ipython", "9.18.1", "sglang requires IPython"),
    Pin("traitlets", "5.16.1", "ipython"),
)


@dataclass(frozen=True)
class LineEdit:
    """Replace the one line equal to ``old`` in ``member`` by ``new`` (fails if not exactly once)."""

    member: str
    old: str
    new: str


@dataclass(frozen=True)
class Trim:
    """How slim repacks one project's wheel."""

    project: str
    reason: str
    drop: tuple[str, ...] = ()  # fnmatch patterns of members left out; each must match something
    strip: tuple[str, ...] = ()  # ELF members whose symbol tables are stripped
    edits: tuple[LineEdit, ...] = ()
    local: str | None = None  # local version label, e.g. "slim" -> 1.2.3+slim
    build_tag: str | None = None  # for wheels whose version must not change (our sglang)


_NO_FLASHINFER = "    _has_flashinfer = False  # sglang-fastpath slim: flashinfer ships without its JIT sources"


def sgl_kernel_trim(arches: tuple[str, ...]) -> Trim:
    """sgl_kernel with only the common_ops builds that ``arches`` load, and no flashinfer routing."""
    unused = sorted({d for a, d in SGL_KERNEL_OPS_DIR.items() if a not in arches} - {
        SGL_KERNEL_OPS_DIR[a] for a in arches})
    return Trim(
        project="sglang-kernel",
        reason="FA3 flash_ops (1.1 GB), FlashMLA and InfLLM ops are loaded lazily and unused with Triton "
        "attention; only the common_ops build of the target GPUs is kept. rmsnorm and top-k/top-p renorm "
        "would route to flashinfer (which JIT-compiles from the stripped sources), so they use sgl_kernel's own",
        drop=("sgl_kernel/flash_ops.abi3.so", "sgl_kernel/flashmla_ops.abi3.so", "sgl_kernel/infllm_ops*.so",
              *(f"{d}*" for d in unused)),
        edits=tuple(LineEdit(m, "    _has_flashinfer = True", _NO_FLASHINFER)
                    for m in ("sgl_kernel/elementwise.py", "sgl_kernel/sampling.py")),
        local="slim." + ".".join(a for a in ARCHES if a in arches),
    )


SLIM_TRIMS: tuple[Trim, ...] = (
    Trim(
        project="flashinfer-python",
        reason="flashinfer/data holds the CUDA/CUTLASS sources of flashinfer's JIT; with Triton attention "
        "and SGLANG_IS_FLASHINFER_AVAILABLE=false nothing is compiled",
        drop=("flashinfer/data/*",),
        local="slim",
    ),
    Trim(
        project="xgrammar",
        reason="xgrammar/lib is a static library for C++ linking; the Python bindings carry debug symbols",
        drop=("xgrammar/lib/*",),
        strip=("xgrammar/libxgrammar_bindings.so",),
        local="slim",
    ),
    Trim(
        project="sglang",
        reason="an LLM server does not need the diffusion runtime (multimodal_gen) nor the Rust HTTP server, "
        "gRPC server and image-processing extensions (only used with SGLANG_RUST_SERVER / gRPC / inkling)",
        drop=("sglang/multimodal_gen/*", "sglang/srt/server/_core*.so", "sglang/srt/grpc/_core*.so",
              "sglang/srt/multimodal/_core*.so"),
        build_tag="1slim",
    ),
)


def slim_trims(arches: tuple[str, ...]) -> dict[str, Trim]:
    """The trims of a slim bundle for ``arches``, by canonical project name."""
    return {t.project: t for t in (*SLIM_TRIMS, sgl_kernel_trim(arches))}


# What the slim profile does not ship although sglang requires it (the host lacks them):
# the packages are imported lazily or only by features an LLM server with Triton attention
# does not use. Listed in the manifest so that nobody is surprised.
SLIM_OMITS_REASON = "slim: not imported by an LLM server with Triton attention (see docs/bundle.md)"

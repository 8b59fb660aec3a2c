"""The adaptive speculation configs the fork ships, for ``--speculative-adaptive-config``.

They live in the package (``data/adaptive/NAME.json``), so a wheel, bundle or Docker install has them;
``benchmark/configs/adaptive-NAME.json`` links to the same files, so the benchmarks run what users get.
"""

from __future__ import annotations

from pathlib import Path

from sglang_fastpath.errors import FastpathError

ADAPTIVE_DIR = Path(__file__).resolve().parent / "data" / "adaptive"

# name -> what it is for (the help text); the file is ADAPTIVE_DIR / f"{name}.json".
CONFIGS: dict[str, str] = {
    "ks": "the throughput policy over K 2/3/4/6/8 (speculative-num-steps 1/2/3/5/7) at every batch size up to 64: "
    "each slot runs the draft length with the most measured tokens per second (kimi16 at accept 3, one H200: "
    "1.76x / 1.87x of plain decode at bs 1 / 8)",
    "ks-off": "the same plus steps 0, speculation turned down, for drafts that are often wrong (kimi16 at "
    "accept ~1.4: 1.00x of plain decode, where fixed K 4 gets 0.83x)",
}


# The fork's switches each config is measured with (all off by default in the patches: none has run at TP > 1),
# as NAME=VALUE; test/gpu/device_bench.sh's ALL3_BF16_VARS and OFF_VARS, less the cycle telemetry.
_GRAPH_MEMORY = (  # 0024, 0026, 0027, 0030: the K set's graphs in one pool, bf16 verify logits
    "SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM=1",
    "SGLANG_TRITON_SHARED_GRAPH_STATE=1",
    "SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=1",
    "SGLANG_CUDA_GRAPH_BF16_VERIFY_LOGITS=1",
)
_TURNED_DOWN = (  # 0034, 0037, 0038, 0045-0047: steps 0 served as a plain decode cycle
    "SGLANG_SPEC_KV_ONLY_ZERO_STEP_DRAFT_EXTEND=1",
    "SGLANG_SPEC_STEPS0_AS_DECODE=1",
    "SGLANG_SPEC_KV_ONLY_DEFER_CYCLES=16",
    "SGLANG_SPEC_OFF_PATH=1",
)
ENV: dict[str, tuple[str, ...]] = {"ks": _GRAPH_MEMORY, "ks-off": _GRAPH_MEMORY + _TURNED_DOWN}


def config_env(name: str) -> tuple[str, ...]:
    """The environment switches (NAME=VALUE) the shipped config ``name`` was measured with."""
    config_path(name)
    return ENV[name]


def config_path(name: str) -> Path:
    """The shipped config ``name``; a FastpathError naming the shipped ones if there is none."""
    if name not in CONFIGS:
        raise FastpathError(f"no shipped adaptive config {name!r}; shipped: {', '.join(CONFIGS)}")
    path = ADAPTIVE_DIR / f"{name}.json"
    if not path.is_file():
        raise FastpathError(f"{path}: missing from this install of sglang-fastpath (reinstall it)")
    return path

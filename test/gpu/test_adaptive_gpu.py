"""`--speculative-adaptive` on a GPU: it starts (0014), keeps greedy output, serves the wide state, and
captures each state's graphs only at the batch sizes routed to it (0016).

The oracle pair's draft predicts the target exactly, so with 4 prompts (the bs-1 slot of 0.5.17's
default adaptive config, candidates steps 1/3/7) adaptive climbs to steps 7: 8 draft tokens a
request, wider than the launch's 4, the width whose draft-extend capture crashed stock 0.5.17.
Graphs are captured for bs 1..8 (``cuda_graph_max_bs_decode`` 8); the default config routes bs 1-7
to the bs-1 slot and bs 8 to the bs-8 slot (candidates steps 0/1/3), so the steps-7 state needs
graphs for bs 1-7 only.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from engines import SPEC, Case, output_ids, run_case

pytestmark = pytest.mark.gpu
ADAPTIVE = (("speculative_adaptive", True),)
# Long enough for the accept-length average to climb through steps 3 to 7 and stay there.
LONG = (("temperature", 0.0), ("max_new_tokens", 256), ("ignore_eos", True))
CAPTURE = re.compile(r"Capture draft extend CUDA graph begin\..*num_tokens_per_req=(\d+), bs=\[([\d, ]*)\]")


def draft_extend_captures(log: Path) -> dict[int, list[int]]:
    """Batch sizes of each draft-extend capture in an engine log, by tokens per request."""
    found: dict[int, list[int]] = {}
    for match in CAPTURE.finditer(log.read_text(errors="replace")):
        found[int(match.group(1))] = [int(b) for b in match.group(2).split(",") if b.strip()]
    return found


def test_adaptive_starts_keeps_greedy_output_and_uses_the_wide_state(oracle_models: Path, engine_dir: Path) -> None:
    base = output_ids(run_case(Case(oracle_models, spec=False, sampling=LONG), engine_dir))
    record = run_case(Case(oracle_models, spec=True, extra=ADAPTIVE, sampling=LONG), engine_dir, timeout_s=600)
    assert output_ids(record) == base, "adaptive EAGLE-3 changed greedy output"
    launch_k = SPEC["speculative_num_draft_tokens"]
    accept = [o["meta_info"]["spec_accept_length"] for o in record["outputs"]]
    assert max(accept) > launch_k, f"no request was served wider than the launch's {launch_k} tokens: {accept}"

    captures = draft_extend_captures(engine_dir / record["log"])
    assert {1, 2, launch_k, 8} <= set(captures), f"draft-extend widths captured: {sorted(captures)}"
    full = captures[launch_k]
    assert full == list(range(1, 9)), full
    assert captures[8] == list(range(1, 8)), f"steps 7 (8 tokens) should capture bs 1-7 only: {captures[8]}"
    assert captures[1] == [8], f"steps 0 (1 token) should capture bs 8 only: {captures[1]}"


THROUGHPUT_CONFIG = Path(__file__).resolve().parents[2] / "benchmark" / "configs" / "adaptive-throughput.json"
SWITCH = re.compile(r"Adaptive spec params updated: steps (\d+) -> (\d+)")


def test_the_throughput_policy_switches_states_and_keeps_greedy_output(oracle_models: Path, engine_dir: Path) -> None:
    """Patch 0019: the throughput policy tries every candidate (steps 0/1/3/7 at bs 1-7) and settles;
    with ``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1`` its steps-0 state skips the draft extend. Greedy
    output must not change across those switches."""
    base = output_ids(run_case(Case(oracle_models, spec=False, sampling=LONG), engine_dir))
    extra = ADAPTIVE + (("speculative_adaptive_config", str(THROUGHPUT_CONFIG)),)
    env = (("SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND", "1"),)
    record = run_case(Case(oracle_models, spec=True, extra=extra, env=env, sampling=LONG), engine_dir, timeout_s=600)
    assert output_ids(record) == base, "the throughput policy's state switches changed greedy output"
    switches = SWITCH.findall((engine_dir / record["log"]).read_text(errors="replace"))
    visited = {int(b) for _, b in switches}
    assert len(visited) >= 2, f"the throughput policy never tried another step count: {switches}"

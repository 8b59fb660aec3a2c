"""EAGLE-3 with temperature > 0 samples the target's distribution (issue 11's chi-square check).

The tiny oracle pair's target puts its hot token 32 logits above the rest, so at a normal
temperature it is greedy in effect; at temperature 16 with top_k 16 the hot token has about a
third of the mass and the other 15 share the rest, a distribution a few thousand samples resolve.
The same prompt is sampled 3000 times with EAGLE-3 (K 4) and without speculation: the output
tokens at positions 1-3 come from verify and its rejection sampling, position 0 from the prefill.
Each position's two samples must pass a two-sample chi-square test (p > 1e-3). The test's power
is shown in the same run: without speculation at temperature 24 instead of 16 the same test must
reject (p < 1e-6), so a sampler that is off by that much would fail here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engines import Case, output_ids, run_case
from token_distribution import two_sample

pytestmark = pytest.mark.gpu

SAMPLES = 3000
POSITIONS = 4
PROMPT = "The capital of France is"
BATCH = (("max_running_requests", 64), ("cuda_graph_max_bs_decode", 64))


def sampled(models: Path, workdir: Path, spec: bool, temperature: float) -> list[list[int]]:
    sampling = (("temperature", temperature), ("top_k", 16), ("max_new_tokens", POSITIONS), ("ignore_eos", True))
    record = run_case(Case(models, spec=spec, extra=BATCH, prompts=(PROMPT,) * SAMPLES, sampling=sampling), workdir,
                      timeout_s=600)
    ids = output_ids(record)
    assert len(ids) == SAMPLES and all(len(row) == POSITIONS for row in ids)
    if spec:
        verify = [o["meta_info"].get("spec_verify_ct", 0) for o in record["outputs"]]
        assert sum(verify) > 0, "no verify step ran: speculation was not exercised"
    return ids


def test_eagle3_sampling_matches_the_target(tiny_models: Path, engine_dir: Path) -> None:
    plain = sampled(tiny_models, engine_dir, spec=False, temperature=16.0)
    eagle = sampled(tiny_models, engine_dir, spec=True, temperature=16.0)
    hotter = sampled(tiny_models, engine_dir, spec=False, temperature=24.0)
    lines = []
    for pos in range(POSITIONS):
        same = two_sample([row[pos] for row in eagle], [row[pos] for row in plain])
        lines.append(f"position {pos}: EAGLE-3 vs target {same.line()}")
        assert same.bins >= 4, f"position {pos}: the distribution is too concentrated to test ({same.line()})"
        assert same.p_value > 1e-3, "\n".join(lines)
    control = two_sample([row[1] for row in hotter], [row[1] for row in plain])
    lines.append(f"position 1: temperature 24 vs 16 (must differ) {control.line()}")
    print("\n".join(lines))
    assert control.p_value < 1e-6, "the test cannot tell temperature 24 from 16: it has no power\n" + "\n".join(lines)

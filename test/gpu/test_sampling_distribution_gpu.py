"""EAGLE-3 with temperature > 0 samples the target's distribution (issue 11's chi-square check).

The tiny oracle pair's target logits come in three tiers (``sglang_fastpath.models.walk``): ``2m``
for its next token, ``m`` for the ``a + b - 2`` hot tokens sharing one walk coordinate with it and
0 for the rest (``m`` = ``oracle.logit_margin``, ``[a, b]`` = ``oracle.cycle`` in ``models.json``).
``top_k`` is ``untied_top_k`` = ``a + b - 1``, so the top-k boundary falls between tiers ``m`` and
0: a ``top_k`` inside a tier is ill-defined, because ``torch.topk`` (the plain sampler) keeps
exactly ``k`` of the tied tokens while EAGLE verify's pivot-based ``top_k_renorm_prob`` keeps all
of them (an H200 run with top_k 16 failed on exactly that). At temperature ``T`` the next token's
share is ``e^(m/T) / (e^(m/T) + a + b - 2)``: for the tiny pair (m 32, a + b - 2 about 126) about
30% at T 8 (``OracleTiers.hot_share``), so draft tokens are accepted often and the residual
path runs too; the test prints it.
The same prompt is sampled 3000 times with EAGLE-3 (K 4) and without speculation: the output
tokens at positions 1-3 come from verify and its rejection sampling, position 0 from the prefill.
Each position's two samples must pass a two-sample chi-square test (p > 1e-3). The test's power
is shown in the same run: without speculation at temperature 12 instead of 8 (a next-token share
of about 10% instead of 30%) the same test must reject (p < 1e-6), so a sampler that is off by
that much would fail here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engines import Case, output_ids, run_case
from token_distribution import OracleTiers, two_sample, untied_top_k

pytestmark = pytest.mark.gpu

SAMPLES = 3000
POSITIONS = 4
PROMPT = "The capital of France is"
BATCH = (("max_running_requests", 64), ("cuda_graph_max_bs_decode", 64))
TEMPERATURE = 8.0
HOTTER = 12.0  # the negative control: must be told apart from TEMPERATURE


def sampled(models: Path, workdir: Path, spec: bool, temperature: float) -> list[list[int]]:
    top_k = untied_top_k(OracleTiers.read(models).cycle)
    sampling = (("temperature", temperature), ("top_k", top_k), ("max_new_tokens", POSITIONS), ("ignore_eos", True))
    record = run_case(Case(models, spec=spec, extra=BATCH, prompts=(PROMPT,) * SAMPLES, sampling=sampling), workdir,
                      timeout_s=600)
    ids = output_ids(record)
    assert len(ids) == SAMPLES and all(len(row) == POSITIONS for row in ids)
    if spec:
        verify = [o["meta_info"].get("spec_verify_ct", 0) for o in record["outputs"]]
        assert sum(verify) > 0, "no verify step ran: speculation was not exercised"
    return ids


def test_eagle3_sampling_matches_the_target(tiny_models: Path, engine_dir: Path) -> None:
    plain = sampled(tiny_models, engine_dir, spec=False, temperature=TEMPERATURE)
    eagle = sampled(tiny_models, engine_dir, spec=True, temperature=TEMPERATURE)
    hotter = sampled(tiny_models, engine_dir, spec=False, temperature=HOTTER)
    tiers = OracleTiers.read(tiny_models)
    lines = [f"top_k {untied_top_k(tiers.cycle)}; next-token share {tiers.hot_share(TEMPERATURE):.1%} at "
             f"temperature {TEMPERATURE:g}, {tiers.hot_share(HOTTER):.1%} at {HOTTER:g}"]
    for pos in range(POSITIONS):
        same = two_sample([row[pos] for row in eagle], [row[pos] for row in plain])
        lines.append(f"position {pos}: EAGLE-3 vs target {same.line()}")
        assert same.bins >= 4, f"position {pos}: the distribution is too concentrated to test ({same.line()})"
        assert same.p_value > 1e-3, "\n".join(lines)
    control = two_sample([row[1] for row in hotter], [row[1] for row in plain])
    lines.append(f"position 1: temperature {HOTTER:g} vs {TEMPERATURE:g} (must differ) {control.line()}")
    print("\n".join(lines))
    lines.insert(0, f"the test must tell temperature {HOTTER:g} from {TEMPERATURE:g}, or it has no power")
    assert control.p_value < 1e-6, "\n".join(lines)

"""Oracle drafts that are wrong on purpose (``models ... --draft-accept-length N | --draft-miss-rate P``).

The target's greedy map and the draft's guesses are computed here in bf16 from the walk's
tensors, as the served models compute them (attention output zero, see ``walk.py``); a top-1
EAGLE chain verify is replayed on those two maps and must give what ``Walk.chain_accept_lengths``
predicts, which is what the GPU tests and the benchmark then hold SGLang to.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from eagle3_reference import rms_norm
from sglang_fastpath.cli import main
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.models.shapes import DraftMisses
from sglang_fastpath.models.walk import LOGIT_MARGIN, Walk, make_walk

DT, VOCAB, INTER = torch.bfloat16, 2000, 1024
DRAFT_TOKENS = 4  # per verify: the last token + 3 drafts, as models.json serves them
MISSES = {"exact": DraftMisses(), "every-3": DraftMisses(accept_length=3), "every-1": DraftMisses(accept_length=1),
          "rate-0.3": DraftMisses(miss_rate=0.3)}


class Bf16Pair:
    """The target's greedy token and the draft's chain of guesses, from the walk's tensors in bf16."""

    def __init__(self, walk: Walk) -> None:
        cpu = torch.device("cpu")
        self.walk, self.ones = walk, torch.ones(walk.hidden)
        self.embed, self.head = walk.embedding(cpu).to(DT), walk.target_head(cpu).to(DT)
        self.mlp = {k: v.to(DT) for k, v in walk.draft_mlp(INTER, cpu).items()}
        self.fc, self.draft_head = walk.draft_fc(3, cpu).to(DT), walk.draft_head(cpu).to(DT)

    def target(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Greedy next token of each token in ``x`` and its logit margin over the runner-up."""
        top = (rms_norm(self.embed[x], self.ones, 1e-5) @ self.head.T).float().topk(2, dim=-1)
        return top.indices[:, 0], top.values[:, 0] - top.values[:, 1]

    def draft(self, x: torch.Tensor, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
        """[len(x), steps] draft guesses from the target's hidden state of each token in ``x`` (the guesses for
        the tokens two, three, ... after it), and the smallest margin of each step."""
        state = torch.cat([self.embed[x]] * 3, dim=-1) @ self.fc.T
        guesses, margins = [], []
        for _ in range(steps):
            h = rms_norm(state, self.ones, 1e-5)
            out = (torch.nn.functional.silu(h @ self.mlp["gate"].T) * (h @ self.mlp["up"].T)) @ self.mlp["down"].T
            state = (out.float() + state.float()).to(DT)
            top = (rms_norm(state, self.ones, 1e-5) @ self.draft_head.T).float().topk(2, dim=-1)
            guesses.append(self.walk.hot[top.indices[:, 0]])
            margins.append((top.values[:, 0] - top.values[:, 1]).min())
        return torch.stack(guesses, dim=1), torch.stack(margins)


def _walk(misses: DraftMisses, hidden: int = 1024, seed: int = 3) -> Walk:
    return make_walk(seed, hidden, VOCAB, list(range(3, VOCAB)), 1000, INTER, misses)


@pytest.mark.parametrize("hidden", [64, 1024])
@pytest.mark.parametrize("name", list(MISSES))
def test_target_and_draft_stay_exact_with_misses(name: str, hidden: int) -> None:
    """The target follows g with its margin; the draft steps the walk once per step whatever g does."""
    walk, x = _walk(MISSES[name], hidden), torch.arange(VOCAB)
    pair = Bf16Pair(walk)
    nxt, margin = pair.target(x)
    assert torch.equal(nxt, walk.next_token) and bool((margin >= LOGIT_MARGIN - 1).all())
    guesses, margins = pair.draft(x, 3)
    for step in range(3):
        assert torch.equal(guesses[:, step], walk.token_at(walk.next_position + 1 + step)), f"step {step}"
    assert bool((margins >= LOGIT_MARGIN - 2).all())


def _replay_chain_verify(pair: Bf16Pair, first_token: int, previous: int, new_tokens: int) -> list[int]:
    """Top-1 EAGLE on the bf16 maps: drafts from the hidden state of the token before the last emitted one,
    the target accepts the longest prefix equal to its own greedy chain, then adds its bonus token."""
    target = pair.target(torch.arange(VOCAB))[0].tolist()
    emitted, out, last = 1, [], first_token
    while emitted < new_tokens:
        drafts = pair.draft(torch.tensor([previous]), DRAFT_TOKENS - 1)[0][0].tolist()
        accepted, tail = 0, last
        for d in drafts:
            if d != target[tail]:
                break
            accepted, previous, tail = accepted + 1, tail, d
        previous, last = tail, target[tail]
        out.append(accepted + 1)
        emitted += out[-1]
    return out


@pytest.mark.parametrize("name", list(MISSES))
def test_chain_accept_lengths_are_what_verify_accepts(name: str) -> None:
    walk = _walk(MISSES[name])
    pair = Bf16Pair(walk)
    for prompt_last in (5, 17, 1999):  # outside the walk or not: the prefill's token is g(prompt_last)
        first = int(walk.next_token[prompt_last])
        replay = _replay_chain_verify(pair, first, prompt_last, 200)
        assert replay == walk.chain_accept_lengths(first, DRAFT_TOKENS, 200), prompt_last
        assert sum(replay[:-1]) < 199 <= sum(replay)


def test_accept_length_n_is_steady_after_the_first_miss() -> None:
    for n in (1, 2, 3, 4):
        walk = _walk(DraftMisses(accept_length=n))
        lengths = walk.chain_accept_lengths(int(walk.next_token[5]), DRAFT_TOKENS, 600)
        body = lengths[2:-1]  # before the first miss, and the cut last verify, may differ
        assert sum(v == n for v in body) >= 0.97 * len(body), (n, lengths)  # the walk's wrap may shift one
        assert walk.expected_accept_length(DRAFT_TOKENS) == pytest.approx(n, abs=0.01)
    assert _walk(DraftMisses()).expected_accept_length(DRAFT_TOKENS) == DRAFT_TOKENS
    rates = [_walk(DraftMisses(miss_rate=p)).expected_accept_length(DRAFT_TOKENS) for p in (0.1, 0.2, 0.4)]
    assert DRAFT_TOKENS > rates[0] > rates[1] > rates[2] > 1


def test_misses_are_seeded() -> None:
    a, b = _walk(DraftMisses(miss_rate=0.2), seed=1), _walk(DraftMisses(miss_rate=0.2), seed=1)
    assert a.skips == b.skips and a.skips != _walk(DraftMisses(miss_rate=0.2), seed=2).skips
    assert 0.15 < len(a.skips) / len(a.order) < 0.25
    assert _walk(DraftMisses(accept_length=3)).skips[:3] == (0, 4, 8)


SMALL = ["--layers", "4", "--hidden", "128", "--intermediate", "384", "--heads", "4", "--kv-heads", "2",
         "--vocab", "3000", "--tokenizer-vocab", "3000", "--draft-vocab", "1000"]


def test_models_cli_records_the_misses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "oracle", "--out", str(tmp_path), *SMALL, "--draft-accept-length", "3"]) == 0
    assert "expected accept length 3.0" in capsys.readouterr().out
    oracle = json.loads((tmp_path / "models.json").read_text())["oracle"]
    assert oracle["misses"]["accept_length"] == 3 and oracle["misses"]["miss_rate"] is None
    assert oracle["expected_accept_length"] == pytest.approx(3, abs=0.01)
    tables = load_file(tmp_path / "oracle.safetensors")
    assert oracle["misses"]["skip_positions"] == len(tables["skips"]) > 0
    assert bool((tables["skips"] % 4 == 0).all())


@pytest.mark.parametrize("extra, message", [
    (["--draft-accept-length", "3", "--draft-miss-rate", "0.2"], "give one of them"),
    (["--draft-accept-length", "0"], "at least 1"),
    (["--draft-miss-rate", "1.5"], "between 0 and 1"),
    (["--draft-miss-rate", "0.2", "--wiring", "random"], "need --wiring oracle"),
])
def test_bad_miss_options_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              extra: list[str], message: str) -> None:
    assert main(["models", "oracle", "--out", str(tmp_path / "m"), *SMALL, *extra]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "m").exists()


def test_draft_misses_validate_without_the_cli() -> None:
    with pytest.raises(FastpathError):
        DraftMisses(accept_length=2, miss_rate=0.1)

"""The oracle walk: weights under which the target's greedy next token is a fixed map of the
current token, and an EAGLE-3 draft computes that map exactly, at any width.

Every attention and MLP output projection of the target is exactly zero, so the
residual stream at every layer is the token's embedding (compute is unchanged,
only its contribution is dropped). The embedding of token ``x`` is a sparse code
of its successor ``g(x)``, and the lm_head reads the code back:

* ``D`` hidden coordinates hold a bias coordinate ``c0`` and two disjoint cycles
  of coordinates ``A`` (length ``a``) and ``B`` (length ``b``), ``gcd(a, b) = 1``.
* The hot set ``S`` (the draft vocabulary, ``a*b`` tokens) is walked in one cycle:
  position ``k`` of the walk has code ``(k mod a, k mod b)``, i.e. the vector
  ``u * (e[c0] + e[A[k mod a]] + e[B[k mod b]])`` with ``u = sqrt(D/3)`` (RMS 1).
  Stepping the walk is the coordinate permutation ``P: A[i] -> A[i+1], B[j] -> B[j+1]``.
* ``g`` sends the walk's token at position ``k`` to the one at ``k + 1``, and every
  other token to a seeded hot token. ``embed[x] = code(g(x))``; the lm_head row of a
  hot token ``t`` is ``kappa * (e[A_t] + e[B_t])``, other rows are zero. After the final
  RMSNorm the logits are ``2*kappa*u`` for ``g(x)``, ``kappa*u`` for tokens sharing
  one coordinate and 0 otherwise: a margin of ``kappa*u = LOGIT_MARGIN`` at any width.

The draft gets the target's hidden state of ``x_t`` (``code(x_{t+1})``) and must
give ``x_{t+2} = g(x_{t+1})``: its fc passes the first captured state through, its
attention output is zero, and its MLP applies ``P`` exactly with the identity
``silu(z) - silu(-z) = z``: per coordinate ``c`` two neurons with gates ``+-gamma*e[c]``,
both with up ``e[c0]`` (which reads ``u``), and downs ``+-(e[P c] - e[c]) / GATE_GAIN``.
Its pre-norm output, fed back for the next draft step, is again a code.

Misses (``DraftMisses``): at a set of *skip* positions the target's ``g`` jumps two
walk positions instead of one (``embed[x]`` is the code of that position), while the
draft still steps ``P`` once. The draft is then wrong exactly where the token before its
guess sits at a skip position; everything else above is unchanged, so the target's
margin and the draft's exactness hold at every width. ``chain_accept_lengths`` replays
what top-1 EAGLE verify then accepts, token for token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch

from sglang_fastpath.errors import FastpathError
from sglang_fastpath.models.shapes import DraftMisses
from sglang_fastpath.models.tensors import StableRng

LOGIT_MARGIN = 32.0  # logit gap between the oracle's next token and any other
GATE_GAIN = 30.0  # silu(-30) ~ -3e-12: the negative half of each neuron pair is off


def code_sizes(wanted: int, coord_budget: int, neuron_budget: int) -> tuple[int, int]:
    """Coprime ``a <= b`` with ``a + b <= coord_budget``, ``2(a + b) <= neuron_budget`` and the largest
    ``a*b <= wanted``."""
    best: tuple[int, int] | None = None
    a = 2
    while a * a <= wanted:
        b = min(wanted // a, coord_budget - a, neuron_budget // 2 - a)
        while b >= a and math.gcd(a, b) != 1:
            b -= 1
        if b >= a and (best is None or a * b >= best[0] * best[1]):  # ties: the most balanced
            best = (a, b)
        a += 1
    if best is None:
        raise FastpathError(f"hidden/intermediate too small for an oracle walk over {wanted} tokens; "
                            "raise --hidden or --draft-vocab")
    return best


@dataclass(frozen=True)
class Walk:
    hidden: int
    vocab: int
    bias_coord: int
    coords_a: tuple[int, ...]
    coords_b: tuple[int, ...]
    order: tuple[int, ...]  # hot tokens in walk order
    entry: tuple[int, ...]  # for every token outside the walk, the walk position g sends it to
    skips: tuple[int, ...] = ()  # walk positions after which g jumps two positions (sorted)

    @property
    def u(self) -> float:
        return math.sqrt(self.hidden / 3)

    @property
    def kappa(self) -> float:
        return LOGIT_MARGIN / self.u

    @cached_property
    def hot(self) -> torch.Tensor:
        """The draft vocabulary: hot token ids, sorted (draft id d <-> target id hot[d])."""
        return torch.tensor(sorted(self.order), dtype=torch.int64)

    @cached_property
    def next_position(self) -> torch.Tensor:
        """For every token x, the walk position of g(x)."""
        pos = torch.tensor(self.entry, dtype=torch.int64)
        order = torch.tensor(self.order, dtype=torch.int64)
        step = torch.ones(len(self.order), dtype=torch.int64)
        step[list(self.skips)] = 2
        pos[order] = (torch.arange(len(self.order)) + step) % len(self.order)
        return pos

    def token_at(self, positions: torch.Tensor) -> torch.Tensor:
        """The walk's tokens at ``positions`` (taken modulo the walk's length)."""
        return torch.tensor(self.order, dtype=torch.int64)[positions % len(self.order)]

    def chain_accept_lengths(self, first_token: int, draft_tokens: int, new_tokens: int) -> list[int]:
        """``chain_accept_lengths`` of this walk's target map and skips."""
        skip_tokens = {self.order[k] for k in self.skips}
        return chain_accept_lengths(self.next_token.tolist(), skip_tokens, first_token, draft_tokens, new_tokens)

    def expected_accept_length(self, draft_tokens: int, tokens: int = 50_000) -> float:
        """The mean tokens per verify over ``tokens`` generated tokens from the walk's first token (the last,
        cut verify left out)."""
        lengths = self.chain_accept_lengths(self.order[0], draft_tokens, tokens)[:-1]
        return sum(lengths) / len(lengths)

    @cached_property
    def next_token(self) -> torch.Tensor:
        """g: the target's greedy next token for every current token."""
        return torch.tensor(self.order, dtype=torch.int64)[self.next_position]

    def _code_coords(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = torch.tensor(self.coords_a, dtype=torch.int64)
        b = torch.tensor(self.coords_b, dtype=torch.int64)
        return a[positions % len(a)], b[positions % len(b)]

    def _positions_of(self, tokens: torch.Tensor) -> torch.Tensor:
        where = torch.full((self.vocab,), -1, dtype=torch.int64)
        where[torch.tensor(self.order, dtype=torch.int64)] = torch.arange(len(self.order))
        return where[tokens]

    def embedding(self, device: torch.device) -> torch.Tensor:
        """[V, D]: row x is code(g(x))."""
        rows = torch.arange(self.vocab)
        ca, cb = self._code_coords(self.next_position)
        out = torch.zeros(self.vocab, self.hidden, device=device)
        for cols in (torch.full_like(rows, self.bias_coord), ca, cb):
            out[rows.to(device), cols.to(device)] = self.u
        return out

    def _head(self, tokens: torch.Tensor, rows: torch.Tensor, n_rows: int, device: torch.device) -> torch.Tensor:
        ca, cb = self._code_coords(self._positions_of(tokens))
        out = torch.zeros(n_rows, self.hidden, device=device)
        for cols in (ca, cb):
            out[rows.to(device), cols.to(device)] = self.kappa
        return out

    def target_head(self, device: torch.device) -> torch.Tensor:
        """[V, D]: hot rows read their code, other rows are zero."""
        return self._head(self.hot, self.hot, self.vocab, device)

    def draft_head(self, device: torch.device) -> torch.Tensor:
        """[Vd, D]: the target's head restricted to the hot tokens, in draft-id order."""
        return self._head(self.hot, torch.arange(len(self.order)), len(self.order), device)

    def draft_fc(self, num_aux: int, device: torch.device) -> torch.Tensor:
        """[D, num_aux*D]: pass the first captured target hidden state through unchanged."""
        out = torch.zeros(self.hidden, num_aux * self.hidden, device=device)
        out[:, : self.hidden] = torch.eye(self.hidden, device=device)
        return out

    def draft_mlp(self, intermediate: int, device: torch.device) -> dict[str, torch.Tensor]:
        """gate/up [I, D] and down [D, I] applying the walk step P to a normalized code."""
        coords = [*self.coords_a, *self.coords_b]
        succ = [*self.coords_a[1:], self.coords_a[0], *self.coords_b[1:], self.coords_b[0]]
        if 2 * len(coords) > intermediate:
            raise FastpathError(f"draft intermediate {intermediate} < {2 * len(coords)} neurons the walk needs")
        gate = torch.zeros(intermediate, self.hidden, device=device)
        up = torch.zeros(intermediate, self.hidden, device=device)
        down = torch.zeros(self.hidden, intermediate, device=device)
        gamma = GATE_GAIN / self.u
        for n, (c, nxt) in enumerate(zip(coords, succ, strict=True)):
            for neuron, sign in ((2 * n, 1.0), (2 * n + 1, -1.0)):
                gate[neuron, c] = sign * gamma
                up[neuron, self.bias_coord] = 1.0
                down[nxt, neuron] += sign / GATE_GAIN
                down[c, neuron] -= sign / GATE_GAIN
        return {"gate": gate, "up": up, "down": down}


def chain_accept_lengths(next_token: list[int], skip_tokens: set[int], first_token: int, draft_tokens: int,
                         new_tokens: int) -> list[int]:
    """The accept length of each top-1 EAGLE verify (accepted drafts + the bonus token) when greedy
    generation with the target map ``next_token`` starts with ``first_token`` (the prefill's token) and
    stops after ``new_tokens`` tokens; ``skip_tokens`` are the walk tokens at skip positions.

    A verify of ``draft_tokens`` tokens (the last emitted token + ``draft_tokens - 1`` drafts) accepts
    drafts while the token before each one is no skip. The last verify is the one that reaches
    ``new_tokens``; its length is the verify's own (the request keeps fewer of its tokens).
    """
    emitted, out, token = 1, [], first_token
    while emitted < new_tokens:
        accepted = 0
        while accepted < draft_tokens - 1 and token not in skip_tokens:
            token, accepted = next_token[token], accepted + 1
        token = next_token[token]  # the bonus token
        out.append(accepted + 1)
        emitted += out[-1]
    return out


def skip_positions(misses: DraftMisses, length: int, seed: int) -> tuple[int, ...]:
    """The walk positions after which the target jumps two positions (see ``DraftMisses``)."""
    if misses.accept_length is not None:
        return tuple(range(0, length, misses.accept_length + 1))
    if misses.miss_rate is not None:
        rng = StableRng(seed, "walk/misses")
        return tuple(k for k in range(length) if rng.below(1 << 30) < misses.miss_rate * (1 << 30))
    return ()


def make_walk(seed: int, hidden: int, vocab: int, eligible: list[int], draft_vocab: int,
              draft_intermediate: int, misses: DraftMisses = DraftMisses()) -> Walk:
    """A walk over up to ``draft_vocab`` of the ``eligible`` token ids (text tokens of the tokenizer)."""
    a, b = code_sizes(min(draft_vocab, len(eligible)), hidden - 1, draft_intermediate)
    coords = StableRng(seed, "walk/coords").permutation(hidden)
    rng = StableRng(seed, "walk/tokens")
    order = tuple(rng.sample(eligible, a * b))
    in_walk = set(order)
    entry = tuple(-1 if t in in_walk else rng.below(a * b) for t in range(vocab))
    return Walk(hidden, vocab, coords[0], tuple(coords[1:1 + a]), tuple(coords[1 + a:1 + a + b]), order, entry,
                skip_positions(misses, a * b, seed))

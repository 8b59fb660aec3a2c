"""A plain-torch EAGLE-3 draft forward for tests, written from reading SGLang 0.5.17's llama_eagle3.py.

One draft step over a sequence of positions: the target features (3 captured hidden
states, concatenated) go through ``fc`` (skipped when they already have the draft's
width, as for the draft's own recurrent state); the decoder layer normalizes the
features (``hidden_norm``) and the token embeddings (``input_layernorm``), attends
causally over ``[embeds, hidden]`` with RoPE and GQA, adds the attention output to
the features (the residual), then ``post_attention_layernorm`` and the SiLU MLP; the
final ``norm`` of (MLP output + residual) feeds ``lm_head`` over the draft vocabulary,
and the pre-norm sum is the recurrent state for the next step. Computed in bf16 like
the served model (RMSNorm in fp32).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file

DT = torch.bfloat16


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float()).to(x.dtype)


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Neox-style rotary embedding on [heads, T, head_dim]."""
    half = x.shape[-1] // 2
    inv = 1.0 / (theta ** (torch.arange(half, dtype=torch.float32) / half))
    ang = positions.float()[:, None] * inv[None, :]
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


@dataclass
class DraftStep:
    logits: torch.Tensor  # [T, draft_vocab]
    state: torch.Tensor  # [T, D]: pre-norm output, the next step's features
    tokens: torch.Tensor  # [T]: greedy draft tokens as target ids


class Eagle3Draft:
    def __init__(self, folder: Path) -> None:
        self.cfg = json.loads((folder / "config.json").read_text())
        tensors = load_file(folder / "model.safetensors")
        self.w = {k: (v.to(DT) if v.is_floating_point() else v) for k, v in tensors.items()}
        self.hot = self.w["d2t"] + torch.arange(self.w["d2t"].shape[0])  # target id of each draft id

    def attention(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        c, w = self.cfg, self.w
        h, kv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        t = x.shape[0]
        q = (x @ w["midlayer.self_attn.q_proj.weight"].T).view(t, h, hd).transpose(0, 1)
        k = (x @ w["midlayer.self_attn.k_proj.weight"].T).view(t, kv, hd).transpose(0, 1)
        v = (x @ w["midlayer.self_attn.v_proj.weight"].T).view(t, kv, hd).transpose(0, 1)
        q, k = rope(q, positions, c["rope_theta"]), rope(k, positions, c["rope_theta"])
        k, v = k.repeat_interleave(h // kv, 0), v.repeat_interleave(h // kv, 0)
        scores = (q.float() @ k.float().transpose(1, 2)) / hd ** 0.5
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        out = (scores.softmax(-1) @ v.float()).to(DT).transpose(0, 1).reshape(t, h * hd)
        return out @ w["midlayer.self_attn.o_proj.weight"].T

    def step(self, embeds: torch.Tensor, features: torch.Tensor, positions: torch.Tensor) -> DraftStep:
        w, eps = self.w, self.cfg["rms_norm_eps"]
        hidden = features.to(DT)
        if hidden.shape[-1] != embeds.shape[-1]:
            hidden = hidden @ w["fc.weight"].T
        residual = hidden
        x = torch.cat([rms_norm(embeds.to(DT), w["midlayer.input_layernorm.weight"], eps),
                       rms_norm(hidden, w["midlayer.hidden_norm.weight"], eps)], dim=-1)
        residual = (self.attention(x, positions).float() + residual.float()).to(DT)
        h = rms_norm(residual, w["midlayer.post_attention_layernorm.weight"], eps)
        gate, up = h @ w["midlayer.mlp.gate_proj.weight"].T, h @ w["midlayer.mlp.up_proj.weight"].T
        mlp = torch.nn.functional.silu(gate) * up
        state = ((mlp @ w["midlayer.mlp.down_proj.weight"].T).float() + residual.float()).to(DT)
        logits = (rms_norm(state, w["norm.weight"], eps) @ w["lm_head.weight"].T).float()
        return DraftStep(logits, state, self.hot[logits.argmax(-1)])

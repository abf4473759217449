"""Blocks written in the tests from public descriptions, never in
python/examples: the models sacplan_torch must predict without having been
tuned on them (test_unseen_blocks.py).

- "moe": a TorchTitan-style LLaMA block with grouped-query attention (kv
  heads a quarter of the query heads, RMSNorm, causal SDPA) and a mixture of
  experts (a softmax router, top-2 routing, SwiGLU experts that each see
  only the tokens routed to them, an index_add_ back into the stream).
- "dropout": a pre-LN block that draws random numbers twice per block
  (rand_like dropouts after attention and after the MLP, as a GPU's
  native_dropout can be saved), plus a stochastic-depth mask drawn first.

Each is a whole model: an embedding Linear, the blocks, a head and a mean
squared loss, trained with AdamW.
"""

from __future__ import annotations

from typing import Callable, Dict

import torch
import torch.nn.functional as F
from torch import nn

import sacplan_torch


class RMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6) * self.weight


class GQAttention(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(dim, 2 * kv_heads * self.head_dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(b, t, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        repeat = self.heads // self.kv_heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(a.transpose(1, 2).reshape(b, t, d))


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class TopTwoMoE(nn.Module):
    def __init__(self, dim: int, hidden: int, experts: int):
        super().__init__()
        self.router = nn.Linear(dim, experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(dim, hidden) for _ in range(experts))

    def forward(self, x):
        b, t, d = x.shape
        tokens = x.reshape(b * t, d)
        weights, chosen = self.router(tokens).softmax(-1).topk(2, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            routed = expert(tokens[rows]) * weights[rows, slot].unsqueeze(-1)
            out = out.index_add(0, rows, routed)
        return out.view(b, t, d)


class MoEBlock(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int, experts: int):
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = GQAttention(dim, heads, heads // 4)
        self.moe_norm = RMSNorm(dim)
        self.moe = TopTwoMoE(dim, hidden, experts)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.moe(self.moe_norm(x))


def _dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    return x * (torch.rand_like(x) >= p).to(x.dtype) / (1 - p)


class DropoutBlock(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int, p: float = 0.2):
        super().__init__()
        self.p = p
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        keep = (torch.rand(x.shape[0], 1, 1, device=x.device) >= self.p).to(x.dtype)
        h = self.norm1(x)
        x = x + keep * _dropout(self.attn(h, h, h, need_weights=False)[0], self.p)
        return x + _dropout(self.fc2(F.gelu(self.fc1(self.norm2(x)), approximate="tanh")),
                            self.p)


class Net(nn.Module):
    def __init__(self, make_block: Callable[[], nn.Module], dim: int, blocks: int,
                 inputs: int):
        super().__init__()
        self.embed = nn.Linear(inputs, dim)
        self.blocks = nn.ModuleList(make_block() for _ in range(blocks))
        self.head = nn.Linear(dim, inputs)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


# (dim, heads, hidden, tokens) per size; the larger one moves the balance
# between weights and activations as well as the scale.
SIZES: Dict[str, Dict[str, int]] = {
    "small": dict(dim=64, heads=4, hidden=128, tokens=48, batch=2, blocks=3),
    "large": dict(dim=128, heads=8, hidden=320, tokens=160, batch=2, blocks=4),
}
INPUTS = 16


def setup(kind: str, size: str, seed: int = 0) -> sacplan_torch.Setup:
    """A seeded model of `kind` ("moe" or "dropout") at `size`, its step (a
    fixed batch, mean squared error), AdamW. The step reseeds the generator
    so that every step draws the same random numbers."""
    s = SIZES[size]
    torch.manual_seed(seed)
    if kind == "moe":
        make = lambda: MoEBlock(s["dim"], s["heads"], s["hidden"] // 2, experts=4)  # noqa: E731
    elif kind == "dropout":
        make = lambda: DropoutBlock(s["dim"], s["heads"], s["hidden"])  # noqa: E731
    else:
        raise ValueError(f"unknown block kind {kind!r}")
    model = Net(make, s["dim"], s["blocks"], INPUTS)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(s["batch"], s["tokens"], INPUTS, generator=g)
    y = torch.randn(s["batch"], s["tokens"], INPUTS, generator=g)

    def step(m: nn.Module) -> torch.Tensor:
        torch.manual_seed(seed + 2)
        return (m(x) - y).square().mean()

    return sacplan_torch.Setup(
        model=model, step=step, blocks="blocks",
        make_optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3),
        name=f"unseen-{kind}-{size}")

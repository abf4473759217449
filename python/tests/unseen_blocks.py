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
- "flux": a double-stream block after the public description of FLUX's
  `DoubleStreamBlock`: per stream (image, text) a 6-way modulation from
  `vec`, LayerNorm + modulate, a qkv Linear with QK RMSNorm, joint attention
  over the text tokens then the image tokens (RoPE tables passed as a
  keyword), a gated projection and a gated GELU-tanh MLP; trained under
  bf16 autocast (autocast's weight-cast cache on).

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


def rope(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    pairs = x.unflatten(-1, (-1, 2))
    x0, x1 = pairs[..., 0], pairs[..., 1]
    return torch.stack((x0 * pe[0] - x1 * pe[1], x0 * pe[1] + x1 * pe[0]), dim=-1).flatten(-2)


class Stream(nn.Module):
    """One stream's weights in a double-stream block."""

    def __init__(self, dim: int, heads: int, mlp: int):
        super().__init__()
        self.heads = heads
        self.mod = nn.Linear(dim, 6 * dim)
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.q_norm = nn.RMSNorm(dim // heads, eps=1e-6)
        self.k_norm = nn.RMSNorm(dim // heads, eps=1e-6)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(approximate="tanh"),
                                 nn.Linear(mlp, dim))

    def qkv_heads(self, x, vec):
        shift1, scale1, gate1, shift2, scale2, gate2 = \
            self.mod(F.silu(vec))[:, None, :].chunk(6, dim=-1)
        b, s, d = x.shape
        h = (1 + scale1) * self.norm1(x) + shift1
        q, k, v = self.qkv(h).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return self.q_norm(q), self.k_norm(k), v, (gate1, shift2, scale2, gate2)

    def finish(self, x, attn, mods):
        gate1, shift2, scale2, gate2 = mods
        x = x + gate1 * self.proj(attn)
        return x + gate2 * self.mlp((1 + scale2) * self.norm2(x) + shift2)


class DoubleStreamBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp: int):
        super().__init__()
        self.img = Stream(dim, heads, mlp)
        self.txt = Stream(dim, heads, mlp)

    def forward(self, img, txt, vec, *, pe):
        iq, ik, iv, img_mods = self.img.qkv_heads(img, vec)
        tq, tk, tv, txt_mods = self.txt.qkv_heads(txt, vec)
        # Joint attention: text tokens first, as FLUX orders them.
        q = rope(torch.cat((tq, iq), dim=2), pe)
        k = rope(torch.cat((tk, ik), dim=2), pe)
        v = torch.cat((tv, iv), dim=2)
        attn = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
        t = txt.shape[1]
        return (self.img.finish(img, attn[:, t:], img_mods),
                self.txt.finish(txt, attn[:, :t], txt_mods))


class DoubleStreamDiT(nn.Module):
    def __init__(self, dim, heads, mlp, img_tokens, txt_tokens, layers):
        super().__init__()
        self.img_in = nn.Linear(16, dim)
        self.txt_in = nn.Linear(48, dim)
        self.time_in = nn.Linear(8, dim)
        self.blocks = nn.ModuleList(DoubleStreamBlock(dim, heads, mlp) for _ in range(layers))
        self.img_out = nn.Linear(dim, 16)
        self.txt_out = nn.Linear(dim, 1)
        self.register_buffer("angle", torch.rand(txt_tokens + img_tokens, dim // heads // 2) * 6,
                             persistent=False)

    def forward(self, latents, text, t):
        img, txt = self.img_in(latents), self.txt_in(text)
        vec = self.time_in(t)
        # Made once per step and handed to every block: a shared input.
        pe = torch.stack((self.angle.cos(), self.angle.sin()))
        for block in self.blocks:
            img, txt = block(img, txt, vec, pe=pe)
        # Both streams reach the loss (the simulator's head reads every stream).
        return self.img_out(img), self.txt_out(txt)


# (dim, heads, hidden, tokens) per size; the larger one moves the balance
# between weights and activations as well as the scale.
SIZES: Dict[str, Dict[str, int]] = {
    "small": dict(dim=64, heads=4, hidden=128, tokens=48, batch=2, blocks=3),
    "large": dict(dim=128, heads=8, hidden=320, tokens=160, batch=2, blocks=4),
}
INPUTS = 16


FLUX_SIZES: Dict[str, Dict[str, int]] = {
    "small": dict(dim=32, heads=2, mlp=128, img_tokens=192, txt_tokens=64, layers=3),
    "large": dict(dim=64, heads=4, mlp=256, img_tokens=384, txt_tokens=128, layers=4),
}


def _flux(size: str, seed: int):
    cfg = FLUX_SIZES[size]
    torch.manual_seed(seed)
    model = DoubleStreamDiT(**cfg)
    g = torch.Generator().manual_seed(seed + 1)
    latents = torch.randn(1, cfg["img_tokens"], 16, generator=g)
    text = torch.randn(1, cfg["txt_tokens"], 48, generator=g)
    t = torch.randn(1, 8, generator=g)
    target = torch.randn(1, cfg["img_tokens"], 16, generator=g)

    def step(m: nn.Module) -> torch.Tensor:
        # The loss inside the autocast region, backward() outside, as
        # trainers do.
        with torch.autocast("cpu", dtype=torch.bfloat16):
            img, txt = m(latents, text, t)
            return F.mse_loss(img.float(), target) + txt.float().square().mean()

    return model, step


def setup(kind: str, size: str, seed: int = 0) -> sacplan_torch.Setup:
    """A seeded model of `kind` ("moe", "dropout" or "flux") at `size`, its
    step (a fixed batch, mean squared error; "flux" under bf16 autocast),
    AdamW. The step reseeds the generator so that every step
    draws the same random numbers."""
    if kind == "flux":
        model, step = _flux(size, seed)
    else:
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

"""A LLaMA-style decoder, small enough to train on a CPU.

Each block follows the public description of Hugging Face's
`LlamaDecoderLayer` (see also docs/models.md "LLaMA decoder block"):

  h = x + o_proj(causal_attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n)))
        with n = input_layernorm(x)
  x = h + down_proj(silu(gate_proj(m)) * up_proj(m))   with m = post_attention_layernorm(h)

RMSNorm computes in fp32 and returns the input's dtype; grouped-query
attention (n_kv_heads < n_heads) repeats each k/v head for its group of
query heads (HF's repeat_kv); RoPE rotates the two halves of each head
(rotate_half) with theta 500000; no biases anywhere. Around the blocks: the
token embedding, a final RMSNorm, an untied lm_head and next-token
cross-entropy. The master parameters are fp32; under autocast the embedding
output is cast to the autocast dtype, so the residual stream and every
activation are in that dtype (as when the weights are kept in bf16), except
the fp32 logits of the loss.

Run `python python/examples/llama_block.py [--size large]` for the
capture -> plan -> apply -> measure walkthrough (python/examples/README.md).
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn

import sacplan_torch

SIZES = {
    "small": dict(dim=64, ffn=176, heads=4, kv_heads=2, layers=3, batch=1,
                  seq=1024, vocab=256),
    "large": dict(dim=128, ffn=352, heads=4, kv_heads=2, layers=5, batch=1,
                  seq=2048, vocab=1024),
}

EPS = 1e-5
THETA = 500000.0


class RMSNorm(nn.RMSNorm):
    """nn.RMSNorm computed in fp32, returned in the input's dtype."""

    def forward(self, x):
        return super().forward(x.float()).to(x.dtype)


def rope_table(seq: int, head_dim: int, theta: float = THETA) -> torch.Tensor:
    """[2, seq, head_dim] fp32: cos and sin, each frequency used for both halves."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angle = torch.outer(torch.arange(seq, dtype=torch.float64), inv)
    angle = torch.cat((angle, angle), dim=-1)
    return torch.stack((angle.cos(), angle.sin())).float()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + rotate_half(x) * sin


class LlamaAttention(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q_proj = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, x, rope):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = rope[0].to(q.dtype), rope[1].to(q.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        groups = self.heads // self.kv_heads
        k = k.repeat_interleave(groups, dim=1)
        v = v.repeat_interleave(groups, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, -1))


class LlamaMLP(nn.Module):
    def __init__(self, dim: int, ffn: int):
        super().__init__()
        self.gate_proj = nn.Linear(dim, ffn, bias=False)
        self.up_proj = nn.Linear(dim, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, dim, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, dim: int, ffn: int, heads: int, kv_heads: int):
        super().__init__()
        self.input_layernorm = RMSNorm(dim, eps=EPS)
        self.self_attn = LlamaAttention(dim, heads, kv_heads)
        self.post_attention_layernorm = RMSNorm(dim, eps=EPS)
        self.mlp = LlamaMLP(dim, ffn)

    def forward(self, x, rope):
        """x [b, s, d] (the residual stream), rope [2, s, head_dim] fp32 (cos, sin)."""
        x = x + self.self_attn(self.input_layernorm(x), rope)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, dim: int, ffn: int, heads: int, kv_heads: int, layers: int, vocab: int):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(LlamaDecoderLayer(dim, ffn, heads, kv_heads)
                                    for _ in range(layers))
        self.norm = RMSNorm(dim, eps=EPS)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)

    def forward(self, tokens, rope):
        """tokens [b, s] -> logits [b, s, vocab]."""
        x = self.embed_tokens(tokens)
        if torch.is_autocast_enabled(x.device.type):
            x = x.to(torch.get_autocast_dtype(x.device.type))
        for block in self.blocks:
            x = block(x, rope)
        return self.lm_head(self.norm(x))


def setup(size: str = "small", seed: int = 0, dtype: torch.dtype = torch.bfloat16,
          device: str = "cpu") -> sacplan_torch.Setup:
    """A seeded LLaMA-style decoder and a fixed batch of random tokens.

    dtype is the autocast dtype of the step (a torch.dtype or a name such as
    "bf16"); torch.float32 runs plain fp32 with no autocast. Parameters are
    fp32 either way.
    """
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, not {size!r}")
    cfg = SIZES[size]
    dtype = sacplan_torch.as_dtype(dtype)
    torch.manual_seed(int(seed))
    model = Llama(cfg["dim"], cfg["ffn"], cfg["heads"], cfg["kv_heads"], cfg["layers"],
                  cfg["vocab"]).to(device)

    generator = torch.Generator().manual_seed(int(seed) + 1)
    tokens = torch.randint(cfg["vocab"], (cfg["batch"], cfg["seq"] + 1), generator=generator)
    inputs, targets = tokens[:, :-1].to(device), tokens[:, 1:].to(device)
    rope = rope_table(cfg["seq"], cfg["dim"] // cfg["heads"]).to(device)
    device_type = torch.device(device).type

    def step(m: nn.Module) -> torch.Tensor:
        autocast = (nullcontext() if dtype == torch.float32
                    else torch.autocast(device_type, dtype=dtype))
        with autocast:
            logits = m(inputs, rope)
            return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())

    return sacplan_torch.Setup(
        model=model, step=step, blocks="blocks",
        make_optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-4),
        name=f"example-llama-{size}")


def main(argv=None) -> int:
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from walkthrough import walk
    return walk(setup, "LLaMA decoder", argv)


if __name__ == "__main__":
    raise SystemExit(main())

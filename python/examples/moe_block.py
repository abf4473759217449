"""A mixture-of-experts decoder in the style of TorchTitan's MoE models
(Llama 4, DeepSeek-V3), small enough to train on a CPU under bf16 autocast.

Each block is llama_block.py's decoder layer (RMSNorm, grouped-query
attention with RoPE, causal SDPA) with its MLP replaced by a token-choice
mixture of experts, from the public description of TorchTitan's `MoE`:

  scores = sigmoid(router(x))                  one score per expert
  top_scores, chosen = topk(scores, k)         each token picks k experts
  order = argsort(chosen)                      tokens grouped by expert
  routed = x[token of order]                   one contiguous slice per expert
  out_e = expert_e(routed slice) * its scores  SwiGLU experts, run in turn
  y = zeros.index_add(token of order, out)     back to token order
  y = y + shared_expert(x)                     an always-on SwiGLU expert

Which tokens an expert sees depends on the data: captured profiles record
the sizes of this batch's routing, and the re-run of a checkpointed block
routes the same tokens the same way.

Run `python python/examples/moe_block.py [--size large]` for the
capture -> plan -> apply -> measure walkthrough (python/examples/README.md).
"""

from __future__ import annotations

import os
import sys
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn

import sacplan_torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_block import EPS, LlamaAttention, RMSNorm, rope_table  # noqa: E402

SIZES = {
    "small": dict(dim=64, heads=4, kv_heads=2, experts=4, top_k=2, expert_ffn=96,
                  layers=3, batch=1, seq=768, vocab=256),
    "large": dict(dim=128, heads=8, kv_heads=2, experts=8, top_k=2, expert_ffn=160,
                  layers=4, batch=1, seq=1536, vocab=1024),
    # The MoE block an H200 run measured the bridge on (scripts/gpu-check.sh,
    # step bridge_moe): GQA 16 heads over 4, 8 experts top-2, 8,192 tokens.
    "gpu": dict(dim=1024, heads=16, kv_heads=4, experts=8, top_k=2, expert_ffn=2816,
                layers=4, batch=1, seq=8192, vocab=8192),
}


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    def __init__(self, dim: int, hidden: int, experts: int, top_k: int):
        super().__init__()
        self.top_k = top_k
        self.router = nn.Linear(dim, experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(dim, hidden) for _ in range(experts))
        self.shared_expert = SwiGLU(dim, hidden)

    def forward(self, x):
        b, s, d = x.shape
        tokens = x.reshape(b * s, d)
        scores = torch.sigmoid(self.router(tokens).float())
        top_scores, chosen = scores.topk(self.top_k, dim=-1)
        order = chosen.flatten().argsort(stable=True)
        token_of = order // self.top_k
        counts = torch.bincount(chosen.flatten(), minlength=len(self.experts)).tolist()
        routed = tokens[token_of]
        weights = top_scores.flatten()[order].unsqueeze(-1)
        outputs, start = [], 0
        for expert, count in zip(self.experts, counts):
            if count:
                part = slice(start, start + count)
                outputs.append(expert(routed[part]) * weights[part].to(routed.dtype))
            start += count
        mixed = torch.zeros_like(tokens).index_add(0, token_of, torch.cat(outputs))
        return (mixed + self.shared_expert(tokens)).view(b, s, d)


class MoEDecoderLayer(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, hidden: int, experts: int,
                 top_k: int):
        super().__init__()
        self.attention_norm = RMSNorm(dim, eps=EPS)
        self.attention = LlamaAttention(dim, heads, kv_heads)
        self.moe_norm = RMSNorm(dim, eps=EPS)
        self.moe = MoE(dim, hidden, experts, top_k)

    def forward(self, x, rope):
        h = x + self.attention(self.attention_norm(x), rope)
        return h + self.moe(self.moe_norm(h))


class MoETransformer(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.tok_embeddings = nn.Embedding(cfg["vocab"], cfg["dim"])
        self.blocks = nn.ModuleList(
            MoEDecoderLayer(cfg["dim"], cfg["heads"], cfg["kv_heads"], cfg["expert_ffn"],
                            cfg["experts"], cfg["top_k"]) for _ in range(cfg["layers"]))
        self.norm = RMSNorm(cfg["dim"], eps=EPS)
        self.output = nn.Linear(cfg["dim"], cfg["vocab"], bias=False)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)

    def forward(self, tokens, rope):
        """tokens [b, s] -> logits [b, s, vocab]."""
        x = self.tok_embeddings(tokens)
        if torch.is_autocast_enabled(x.device.type):
            x = x.to(torch.get_autocast_dtype(x.device.type))
        for block in self.blocks:
            x = block(x, rope)
        return self.output(self.norm(x))


def setup(size: str = "small", seed: int = 0, dtype: torch.dtype = torch.bfloat16,
          device: str = "cpu") -> sacplan_torch.Setup:
    """A seeded MoE decoder and a fixed batch of random tokens.

    dtype is the autocast dtype of the step (a torch.dtype or a name such as
    "bf16"); torch.float32 runs plain fp32 with no autocast. Parameters are
    fp32 either way.
    """
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, not {size!r}")
    cfg = SIZES[size]
    dtype = sacplan_torch.as_dtype(dtype)
    torch.manual_seed(int(seed))
    model = MoETransformer(cfg).to(device)

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
        name=f"example-moe-{size}")


def main(argv=None) -> int:
    from walkthrough import walk
    return walk(setup, "MoE decoder", argv)


if __name__ == "__main__":
    raise SystemExit(main())

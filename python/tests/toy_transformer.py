"""A small pre-norm transformer written in the tests, one sacplan_torch has
never seen: attention (LayerNorm -> qkv Linear -> SDPA -> out Linear) and an
MLP (Linear -> LayerNorm -> tanh GELU in torch ops -> Linear), each with a
residual. test_apply.py and fsdp_worker.py build it at their own sizes."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def tanh_gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        qkv = self.qkv(self.norm(x)).view(b, t, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v)
        return self.out(a.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(tanh_gelu(self.norm(self.fc1(x))))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int):
        super().__init__()
        self.attn = Attention(dim, heads)
        self.mlp = MLP(dim, hidden)

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.mlp(x)


class Net(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int, blocks: int, inputs: int,
                 outputs: int):
        super().__init__()
        self.embed = nn.Linear(inputs, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, hidden) for _ in range(blocks))
        self.head = nn.Linear(dim, outputs)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def make_net(**sizes) -> Net:
    """Seeded; every parameter, biases too, nudged off its initial value so
    that a wrong bias gradient shows."""
    torch.manual_seed(0)
    net = Net(**sizes)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return net

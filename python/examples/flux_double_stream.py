"""A FLUX-style image DiT built of double-stream blocks, small enough to
train on a CPU under bf16 autocast.

Each block, from the public description of FLUX's `DoubleStreamBlock` (SD3's
MM-DiT block is the same shape): the image and the text tokens keep their
own weights and their own residual stream, and meet only in one joint
attention.

  per stream s in (img, txt):
    (shift1, scale1, gate1), (shift2, scale2, gate2) = s.mod(vec)
    q, k, v = s.attn.qkv((1 + scale1) * norm1(s) + shift1)   QK RMSNorm per head
  q, k, v = cat(txt, img) of each                       text tokens first
  attn = attention(rope(q), rope(k), v)
  per stream:
    s = s + gate1 * s.attn.proj(attn[its tokens])
    s = s + gate2 * s.mlp((1 + scale2) * norm2(s) + shift2)    GELU(tanh) MLP
  return img, txt

A block takes both streams and returns both, so sacplan_torch captures two
carried inputs per block (docs/streams.md) and the shared `vec` and `pe`.
The rotary table is FLUX's 3-axis one over position ids (0, row, column)
for the image tokens and (0, 0, 0) for the text tokens.

Around the blocks: img_in (a Linear over 2x2 patches of a 16-channel
latent), txt_in (Linear 4096 -> d on fake T5 features), vec = time_in(
sinusoidal(t)) + vector_in(pooled CLIP vector), a final layer on the image
tokens, and a flow-matching loss.

Run `python python/examples/flux_double_stream.py [--size large]` for the
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

# FLUX's single- and double-stream blocks share their parts.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from single_stream import (FREQ_DIM, TEXT_DIM, VEC_DIM, LastLayer, MLPEmbedder,  # noqa: E402
                           Modulation, QKNorm, apply_rope, timestep_embedding)

# Latent image [b, 16, height, width]; image tokens = height/2 * width/2.
SIZES = {
    "small": dict(dim=64, heads=2, mlp_hidden=256, layers=3, batch=1,
                  height=64, width=64, text_tokens=64),     # 1024 + 64 tokens
    "large": dict(dim=128, heads=4, mlp_hidden=512, layers=4, batch=1,
                  height=64, width=96, text_tokens=128),    # 1536 + 128 tokens
    # A GPU's size (docs/gpu.md): 12 heads of 128, four blocks.
    "gpu": dict(dim=1536, heads=12, mlp_hidden=6144, layers=4, batch=1,
                height=128, width=128, text_tokens=512),    # 4096 + 512 tokens
}
IN_CHANNELS = 16
PATCH_DIM = IN_CHANNELS * 4


def rope_table(rows: int, cols: int, text_tokens: int, head_dim: int,
               theta: float = 10000.0) -> torch.Tensor:
    """[2, text + rows*cols, head_dim/2] (cos, sin) over FLUX's position ids:
    text tokens (0, 0, 0), image token (0, r, c); the channel pairs split
    over the three axes as (c - 2*(c//3), c//3, c//3)."""
    pairs = head_dim // 2
    split = (pairs - 2 * (pairs // 3), pairs // 3, pairs // 3)
    r, c = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
    ids = torch.stack((torch.zeros(rows * cols), r.flatten().float(), c.flatten().float()), -1)
    ids = torch.cat((torch.zeros(text_tokens, 3), ids)).double()
    angles = []
    for axis, n in enumerate(split):
        inv = 1.0 / theta ** (torch.arange(n, dtype=torch.float64) * 2 / (2 * n))
        angles.append(ids[:, axis:axis + 1] * inv)
    angle = torch.cat(angles, dim=-1)
    return torch.stack((angle.cos(), angle.sin())).float()


class SelfAttention(nn.Module):
    """One stream's attention weights: qkv, QK norm and the output projection."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.norm = QKNorm(dim // heads)
        self.proj = nn.Linear(dim, dim)

    def project(self, x: torch.Tensor):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k = self.norm(q, k)
        return q.to(v.dtype), k.to(v.dtype), v


class StreamWeights(nn.Module):
    """What each stream of a double-stream block owns."""

    def __init__(self, dim: int, heads: int, mlp_hidden: int):
        super().__init__()
        self.mod = Modulation(dim, 6)
        self.norm1 = nn.LayerNorm(dim, eps=1e-6, elementwise_affine=False)
        self.attn = SelfAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6, elementwise_affine=False)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_hidden), nn.GELU(approximate="tanh"),
                                 nn.Linear(mlp_hidden, dim))

    def pre_attention(self, x, vec):
        shift1, scale1, gate1, shift2, scale2, gate2 = self.mod(vec)
        q, k, v = self.attn.project((1 + scale1) * self.norm1(x) + shift1)
        return (q, k, v), (gate1, shift2, scale2, gate2)

    def post_attention(self, x, attn, mods):
        gate1, shift2, scale2, gate2 = mods
        x = x + gate1 * self.attn.proj(attn)
        return x + gate2 * self.mlp((1 + scale2) * self.norm2(x) + shift2)


class DoubleStreamBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_hidden: int):
        super().__init__()
        self.img = StreamWeights(dim, heads, mlp_hidden)
        self.txt = StreamWeights(dim, heads, mlp_hidden)

    def forward(self, img, txt, vec, pe):
        """img [b, n_img, d] and txt [b, n_txt, d] (the two residual
        streams), vec [b, d], pe [2, n_txt + n_img, head_dim/2] -> img, txt."""
        (img_q, img_k, img_v), img_mods = self.img.pre_attention(img, vec)
        (txt_q, txt_k, txt_v), txt_mods = self.txt.pre_attention(txt, vec)
        q = apply_rope(torch.cat((txt_q, img_q), dim=2), pe).to(img_v.dtype)
        k = apply_rope(torch.cat((txt_k, img_k), dim=2), pe).to(img_v.dtype)
        v = torch.cat((txt_v, img_v), dim=2)
        attn = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
        n_txt = txt.shape[1]
        return (self.img.post_attention(img, attn[:, n_txt:], img_mods),
                self.txt.post_attention(txt, attn[:, :n_txt], txt_mods))


class DoubleStreamDiT(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_hidden: int, layers: int):
        super().__init__()
        self.img_in = nn.Linear(PATCH_DIM, dim)
        self.txt_in = nn.Linear(TEXT_DIM, dim)
        self.time_in = MLPEmbedder(FREQ_DIM, dim)
        self.vector_in = MLPEmbedder(VEC_DIM, dim)
        self.blocks = nn.ModuleList(DoubleStreamBlock(dim, heads, mlp_hidden)
                                    for _ in range(layers))
        self.final_layer = LastLayer(dim, PATCH_DIM)

    @staticmethod
    def pack(latent: torch.Tensor) -> torch.Tensor:
        """[b, C, H, W] -> [b, H/2 * W/2, C*2*2] (FLUX's 2x2 packing)."""
        b, c, h, w = latent.shape
        x = latent.reshape(b, c, h // 2, 2, w // 2, 2).permute(0, 2, 4, 1, 3, 5)
        return x.reshape(b, (h // 2) * (w // 2), c * 4)

    @staticmethod
    def unpack(tokens: torch.Tensor, shape) -> torch.Tensor:
        b, c, h, w = shape
        x = tokens.reshape(b, h // 2, w // 2, c, 2, 2).permute(0, 3, 1, 4, 2, 5)
        return x.reshape(b, c, h, w)

    def forward(self, latent, t, txt, y, pe):
        """latent [b, 16, H, W] noisy, t [b] in [0, 1], txt [b, n, 4096]
        text features, y [b, 768] pooled text vector, pe the RoPE table ->
        predicted velocity like latent."""
        img = self.img_in(self.pack(latent))
        txt = self.txt_in(txt)
        vec = self.time_in(timestep_embedding(1000 * t, FREQ_DIM)) + self.vector_in(y)
        for block in self.blocks:
            img, txt = block(img, txt, vec, pe)
        # The text stream's last output reaches the loss only through the
        # attention of the blocks before: FLUX drops it after the last
        # double block, which here would leave the last block's text MLP
        # without a gradient, so it adds a zero-weighted term instead.
        out = self.final_layer(img, vec)
        return self.unpack(out.float(), latent.shape), txt.float().mean() * 0.0


def setup(size: str = "small", seed: int = 0, dtype: torch.dtype = torch.bfloat16,
          device: str = "cpu") -> sacplan_torch.Setup:
    """A seeded double-stream DiT and a fixed flow-matching batch.

    dtype is the autocast dtype of the step (a torch.dtype or a name such as
    "bf16"); torch.float32 runs plain fp32 with no autocast. Parameters are
    fp32 either way.
    """
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, not {size!r}")
    cfg = SIZES[size]
    dtype = sacplan_torch.as_dtype(dtype)
    torch.manual_seed(int(seed))
    model = DoubleStreamDiT(cfg["dim"], cfg["heads"], cfg["mlp_hidden"], cfg["layers"]).to(device)

    generator = torch.Generator().manual_seed(int(seed) + 1)
    b = cfg["batch"]
    shape = (b, IN_CHANNELS, cfg["height"], cfg["width"])
    x0 = torch.randn(shape, generator=generator)
    noise = torch.randn(shape, generator=generator)
    t = torch.rand(b, generator=generator)
    x_t = (1 - t.view(b, 1, 1, 1)) * x0 + t.view(b, 1, 1, 1) * noise
    batch = dict(x_t=x_t, t=t, target=noise - x0,
                 txt=torch.randn(b, cfg["text_tokens"], TEXT_DIM, generator=generator),
                 y=torch.randn(b, VEC_DIM, generator=generator),
                 pe=rope_table(cfg["height"] // 2, cfg["width"] // 2, cfg["text_tokens"],
                               cfg["dim"] // cfg["heads"]))
    batch = {key: value.to(device) for key, value in batch.items()}
    device_type = torch.device(device).type

    def step(m: nn.Module) -> torch.Tensor:
        autocast = (nullcontext() if dtype == torch.float32
                    else torch.autocast(device_type, dtype=dtype))
        with autocast:
            velocity, txt_term = m(batch["x_t"], batch["t"], batch["txt"], batch["y"],
                                   batch["pe"])
            return F.mse_loss(velocity.float(), batch["target"]) + txt_term

    return sacplan_torch.Setup(
        model=model, step=step, blocks="blocks",
        make_optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-4),
        name=f"example-flux-double-stream-{size}")


def main(argv=None) -> int:
    from walkthrough import walk
    return walk(setup, "FLUX-style double-stream DiT", argv)


if __name__ == "__main__":
    raise SystemExit(main())

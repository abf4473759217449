"""A single-stream video DiT (the HunyuanVideo / FLUX "single block"), small
enough to train on a CPU.

Each block, from the public descriptions of FLUX's `SingleStreamBlock` and
HunyuanVideo's `MMSingleStreamBlock`:

  shift, scale, gate = modulation(vec)          Linear(d, 3d) on SiLU(vec)
  h = (1 + scale) * pre_norm(x) + shift         LayerNorm without affine
  qkv, mlp = split(linear1(h), [3d, mlp_hidden])    one fused Linear
  q, k = rope(norm.query_norm(q)), rope(norm.key_norm(k))   QK RMSNorm per head
  y = linear2(cat(attention(q, k, v), gelu_tanh(mlp)))      one fused Linear
  x = x + gate * y

The tokens are the video tokens followed by the text tokens (HunyuanVideo's
order); the rotary table is 3-axis (frames, height, width) on the video
tokens and the identity on the text tokens (FLUX gives text position ids 0).
Under autocast the residual stream is in the autocast dtype, as in both
reference models (the gate comes out of a Linear).

Around the blocks: img_in (a Linear over flattened 1x2x2 patches of a
16-channel latent video), txt_in (Linear 4096 -> d on fake T5 features),
vec = time_in(sinusoidal(t)) + vector_in(pooled CLIP vector, 768), a final
layer (LayerNorm + shift/scale from vec + Linear to the patch) on the video
tokens only, and a flow-matching loss: MSE between the predicted velocity and
noise - x0 at a random timestep.

Run `python python/examples/single_stream.py [--size large]` for the
capture -> plan -> apply -> measure walkthrough (python/examples/README.md).
"""

from __future__ import annotations

import math
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn

import sacplan_torch

# Latent video [b, 16, frames, height, width]; video tokens = frames * height/2 * width/2.
SIZES = {
    "small": dict(dim=64, mlp_hidden=256, heads=2, layers=3, batch=1,
                  frames=4, height=28, width=32, text_tokens=64),    # 896 + 64 tokens
    "large": dict(dim=128, mlp_hidden=512, heads=4, layers=5, batch=1,
                  frames=6, height=32, width=40, text_tokens=128),   # 1920 + 128 tokens
}

IN_CHANNELS = 16
PATCH = (1, 2, 2)
TEXT_DIM = 4096       # T5 features
VEC_DIM = 768         # pooled CLIP text vector
FREQ_DIM = 256


def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32,
                                                           device=t.device) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat((torch.cos(args), torch.sin(args)), dim=-1)


def rope_table(grid, text_tokens: int, head_dim: int, theta: float = 10000.0) -> torch.Tensor:
    """[2, s, head_dim/2] (cos, sin) for the video tokens on `grid` (frames,
    height, width; channel pairs split c - 2*(c//3), c//3, c//3) followed by
    `text_tokens` rows of angle 0."""
    c = head_dim // 2
    split = (c - 2 * (c // 3), c // 3, c // 3)
    angles = []
    for axis, (size, pairs) in enumerate(zip(grid, split)):
        inv = 1.0 / theta ** (torch.arange(pairs, dtype=torch.float64) * 2 / (2 * pairs))
        table = torch.outer(torch.arange(size, dtype=torch.float64), inv)
        shape = [1, 1, 1, pairs]
        shape[axis] = size
        angles.append(table.view(shape).expand(*grid, pairs))
    angle = torch.cat(angles, dim=-1).reshape(-1, c)
    angle = torch.cat((angle, torch.zeros(text_tokens, c, dtype=torch.float64)))
    return torch.stack((angle.cos(), angle.sin())).float()


def apply_rope(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    """x [b, h, s, head_dim], pe [2, s, head_dim/2] -> rotated x, in fp32."""
    pairs = x.float().unflatten(-1, (-1, 2))
    x0, x1 = pairs[..., 0], pairs[..., 1]
    cos, sin = pe[0], pe[1]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


class QKNorm(nn.Module):
    def __init__(self, head_dim: int):
        super().__init__()
        self.query_norm = nn.RMSNorm(head_dim, eps=1e-6)
        self.key_norm = nn.RMSNorm(head_dim, eps=1e-6)

    def forward(self, q, k):
        # In fp32, as FLUX's RMSNorm computes on x.float().
        return self.query_norm(q.float()), self.key_norm(k.float())


class Modulation(nn.Module):
    def __init__(self, dim: int, factor: int):
        super().__init__()
        self.factor = factor
        self.lin = nn.Linear(dim, factor * dim)

    def forward(self, vec):
        return self.lin(F.silu(vec))[:, None, :].chunk(self.factor, dim=-1)


class SingleStreamBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_hidden: int):
        super().__init__()
        self.dim, self.heads, self.mlp_hidden = dim, heads, mlp_hidden
        self.linear1 = nn.Linear(dim, 3 * dim + mlp_hidden)
        self.linear2 = nn.Linear(dim + mlp_hidden, dim)
        self.norm = QKNorm(dim // heads)
        self.pre_norm = nn.LayerNorm(dim, eps=1e-6, elementwise_affine=False)
        self.mlp_act = nn.GELU(approximate="tanh")
        self.modulation = Modulation(dim, 3)

    def forward(self, x, vec, pe):
        """x [b, s, d] (the residual stream), vec [b, d] (time + pooled text),
        pe [2, s, head_dim/2] (RoPE cos/sin)."""
        b, s, d = x.shape
        shift, scale, gate = self.modulation(vec)
        h = (1 + scale) * self.pre_norm(x) + shift
        qkv, mlp = torch.split(self.linear1(h), [3 * d, self.mlp_hidden], dim=-1)
        q, k, v = qkv.view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k = self.norm(q, k)
        q = apply_rope(q, pe).to(v.dtype)
        k = apply_rope(k, pe).to(v.dtype)
        attn = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, d)
        y = self.linear2(torch.cat((attn, self.mlp_act(mlp)), dim=2))
        return x + gate * y


class MLPEmbedder(nn.Module):
    def __init__(self, in_dim: int, dim: int):
        super().__init__()
        self.in_layer = nn.Linear(in_dim, dim)
        self.silu = nn.SiLU()
        self.out_layer = nn.Linear(dim, dim)

    def forward(self, x):
        return self.out_layer(self.silu(self.in_layer(x)))


class LastLayer(nn.Module):
    def __init__(self, dim: int, out_dim: int):
        super().__init__()
        self.norm_final = nn.LayerNorm(dim, eps=1e-6, elementwise_affine=False)
        self.linear = nn.Linear(dim, out_dim)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))

    def forward(self, x, vec):
        shift, scale = self.adaLN_modulation(vec)[:, None, :].chunk(2, dim=-1)
        return self.linear((1 + scale) * self.norm_final(x) + shift)


class SingleStreamDiT(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_hidden: int, layers: int):
        super().__init__()
        patch_dim = IN_CHANNELS * math.prod(PATCH)
        self.img_in = nn.Linear(patch_dim, dim)
        self.txt_in = nn.Linear(TEXT_DIM, dim)
        self.time_in = MLPEmbedder(FREQ_DIM, dim)
        self.vector_in = MLPEmbedder(VEC_DIM, dim)
        self.blocks = nn.ModuleList(SingleStreamBlock(dim, heads, mlp_hidden)
                                    for _ in range(layers))
        self.final_layer = LastLayer(dim, patch_dim)

    @staticmethod
    def patchify(video: torch.Tensor) -> torch.Tensor:
        """[b, C, F, H, W] -> [b, F*H/2*W/2, C*1*2*2]."""
        b, c, f, h, w = video.shape
        pf, ph, pw = PATCH
        x = video.reshape(b, c, f // pf, pf, h // ph, ph, w // pw, pw)
        x = x.permute(0, 2, 4, 6, 1, 3, 5, 7)
        return x.reshape(b, (f // pf) * (h // ph) * (w // pw), c * pf * ph * pw)

    @staticmethod
    def unpatchify(tokens: torch.Tensor, shape) -> torch.Tensor:
        b, c, f, h, w = shape
        pf, ph, pw = PATCH
        x = tokens.reshape(b, f // pf, h // ph, w // pw, c, pf, ph, pw)
        return x.permute(0, 4, 1, 5, 2, 6, 3, 7).reshape(b, c, f, h, w)

    def forward(self, video, t, txt, y, pe):
        """video [b, 16, F, H, W] noisy latents, t [b] in [0, 1], txt
        [b, c, 4096] text features, y [b, 768] pooled text vector, pe the
        RoPE table -> predicted velocity like video."""
        img = self.img_in(self.patchify(video))
        vec = self.time_in(timestep_embedding(1000 * t, FREQ_DIM)) + self.vector_in(y)
        x = torch.cat((img, self.txt_in(txt)), dim=1)
        for block in self.blocks:
            x = block(x, vec, pe)
        out = self.final_layer(x[:, :img.shape[1]], vec)
        return self.unpatchify(out.float(), video.shape)


def setup(size: str = "small", seed: int = 0, dtype: torch.dtype = torch.bfloat16,
          device: str = "cpu") -> sacplan_torch.Setup:
    """A seeded single-stream DiT and a fixed flow-matching batch.

    dtype is the autocast dtype of the step (a torch.dtype or a name such as
    "bf16"); torch.float32 runs plain fp32 with no autocast. Parameters are
    fp32 either way.
    """
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, not {size!r}")
    cfg = SIZES[size]
    dtype = sacplan_torch.as_dtype(dtype)
    torch.manual_seed(int(seed))
    model = SingleStreamDiT(cfg["dim"], cfg["heads"], cfg["mlp_hidden"], cfg["layers"]).to(device)

    generator = torch.Generator().manual_seed(int(seed) + 1)
    b = cfg["batch"]
    shape = (b, IN_CHANNELS, cfg["frames"], cfg["height"], cfg["width"])
    x0 = torch.randn(shape, generator=generator)
    noise = torch.randn(shape, generator=generator)
    t = torch.rand(b, generator=generator)
    x_t = (1 - t.view(b, 1, 1, 1, 1)) * x0 + t.view(b, 1, 1, 1, 1) * noise
    grid = (cfg["frames"] // PATCH[0], cfg["height"] // PATCH[1], cfg["width"] // PATCH[2])
    batch = dict(x_t=x_t, t=t, target=noise - x0,
                 txt=torch.randn(b, cfg["text_tokens"], TEXT_DIM, generator=generator),
                 y=torch.randn(b, VEC_DIM, generator=generator),
                 pe=rope_table(grid, cfg["text_tokens"], cfg["dim"] // cfg["heads"]))
    batch = {key: value.to(device) for key, value in batch.items()}
    device_type = torch.device(device).type

    def step(m: nn.Module) -> torch.Tensor:
        autocast = (nullcontext() if dtype == torch.float32
                    else torch.autocast(device_type, dtype=dtype))
        with autocast:
            velocity = m(batch["x_t"], batch["t"], batch["txt"], batch["y"], batch["pe"])
            return F.mse_loss(velocity.float(), batch["target"])

    return sacplan_torch.Setup(
        model=model, step=step, blocks="blocks",
        make_optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-4),
        name=f"example-single-stream-{size}")


def main(argv=None) -> int:
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from walkthrough import walk
    return walk(setup, "Single-stream DiT", argv)


if __name__ == "__main__":
    raise SystemExit(main())

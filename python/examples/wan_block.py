"""A Wan2.1-style video diffusion transformer, small enough to train on a CPU.

The blocks follow the public description of Wan2.1's `WanAttentionBlock`
(`wan/modules/model.py`; see also docs/models.md "Wan2.1 block"):

  e = modulation + e0                       fp32, 6 vectors of [b, d]
  x = x + self_attn(norm1(x) * (1 + e1) + e0) * e2     gated, fp32 residual
  x = x + cross_attn(norm3(x), context)                ungated
  x = x + ffn(norm2(x) * (1 + e4) + e3) * e5           gated, fp32 residual

Self-attention: q/k/v/o Linear with bias, RMSNorm over the whole dim on q and
k (in fp32, as Wan's WanRMSNorm computes on x.float()), a 3-axis rotary embedding (frames, height, width) from a precomputed
cos/sin table, `F.scaled_dot_product_attention`. Cross-attention attends to
the text context with the same projections and norms but no RoPE. The FFN is
Linear(d, f), GELU(tanh), Linear(f, d). The residual stream and the
modulation run in fp32 (autocast off, as Wan does); everything that feeds a
Linear runs under autocast.

Around the blocks: a patch embedding (a Linear over flattened 1x2x2 patches,
the same parameters as Wan's Conv3d), a text embedding of fake T5 features
(Linear 4096 -> d, GELU(tanh), Linear d -> d), a time embedding (sinusoidal ->
Linear, SiLU, Linear, then SiLU + Linear to 6*d), the head (LayerNorm +
2-way modulation + Linear to the patch) and a flow-matching loss: MSE between
the predicted velocity and noise - x0 at a random timestep.

Run `python python/examples/wan_block.py [--size large]` to capture a profile,
plan under a budget with the sacplan CLI, apply the plan and compare the
prediction with the measured peak (see python/examples/README.md).
"""

from __future__ import annotations

import math
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn

import sacplan_torch

# Latent video [b, 16, frames, height, width]; tokens = frames * height/2 * width/2.
SIZES = {
    "small": dict(dim=64, ffn=256, heads=2, layers=3, batch=1,
                  frames=4, height=32, width=32, text_tokens=32),    # 1024 tokens
    "large": dict(dim=128, ffn=512, heads=4, layers=5, batch=1,
                  frames=8, height=32, width=32, text_tokens=128),   # 2048 tokens
    # Wan2.1-T2V-1.3B's blocks at a token count a CPU can step through
    # (tests/test_capture_scale.py: capture time and identical op lists).
    "1.3b-shape": dict(dim=1536, ffn=8960, heads=12, layers=30, batch=1,
                       frames=1, height=8, width=8, text_tokens=16),  # 16 tokens
    # Wan2.1-1.3B's blocks at a GPU's token count, six of them
    # (scripts/gpu_bridge_check.py, run by scripts/gpu-check.sh).
    "gpu": dict(dim=1536, ffn=8960, heads=12, layers=6, batch=1,
                frames=8, height=64, width=64, text_tokens=512),     # 8192 tokens
    "gpu-long": dict(dim=1536, ffn=8960, heads=12, layers=4, batch=1,
                     frames=8, height=128, width=128, text_tokens=512),  # 32768 tokens
}

IN_CHANNELS = 16      # Wan's VAE latent channels
PATCH = (1, 2, 2)     # Wan's patch size
TEXT_DIM = 4096       # umT5-XXL features
FREQ_DIM = 256        # sinusoidal time embedding width
EPS = 1e-6


def fp32(x: torch.Tensor):
    """Autocast off on x's device: Wan runs the modulation and the residual
    stream in fp32."""
    return torch.autocast(x.device.type, enabled=False)


def rope_apply(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """Rotates channel pairs of x [b, s, n, head_dim] by freqs [2, s, head_dim/2]
    (cos, sin). Computed in fp32 and returned in fp32, as Wan's rope_apply."""
    b, s, n, hd = x.shape
    pairs = x.float().reshape(b, s, n, hd // 2, 2)
    x0, x1 = pairs[..., 0], pairs[..., 1]
    cos = freqs[0][None, :, None, :]
    sin = freqs[1][None, :, None, :]
    out = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
    return out.flatten(3)


def rope_table(grid, head_dim: int, theta: float = 10000.0) -> torch.Tensor:
    """Wan's 3-axis RoPE as a real table [2, f*h*w, head_dim/2]: the c =
    head_dim/2 channel pairs split c - 2*(c//3) / c//3 / c//3 over frames,
    height and width."""
    c = head_dim // 2
    split = (c - 2 * (c // 3), c // 3, c // 3)
    angles = []
    for axis, (size, pairs) in enumerate(zip(grid, split)):
        inv = 1.0 / theta ** (torch.arange(pairs, dtype=torch.float64) * 2 / (2 * pairs))
        pos = torch.arange(size, dtype=torch.float64)
        table = torch.outer(pos, inv)                      # [size, pairs]
        shape = [1, 1, 1, pairs]
        shape[axis] = size
        angles.append(table.view(shape).expand(*grid, pairs))
    angle = torch.cat(angles, dim=-1).reshape(-1, c)       # [s, c]
    return torch.stack((angle.cos(), angle.sin())).float()


def sinusoidal_embedding(position: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    scale = torch.pow(10000.0, -torch.arange(half, dtype=torch.float64, device=position.device) / half)
    angle = torch.outer(position.double(), scale)
    return torch.cat((angle.cos(), angle.sin()), dim=1).float()


def attention(q, k, v, heads: int) -> torch.Tensor:
    """q [b, s, d], k/v [b, t, d] -> [b, s, d] with `heads` heads."""
    b, s, d = q.shape
    t = k.shape[1]
    hd = d // heads
    q = q.view(b, s, heads, hd).transpose(1, 2)
    k = k.view(b, t, heads, hd).transpose(1, 2)
    v = v.view(b, t, heads, hd).transpose(1, 2)
    out = F.scaled_dot_product_attention(q, k, v)
    return out.transpose(1, 2).reshape(b, s, d)


class WanSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.norm_q = nn.RMSNorm(dim, eps=EPS)
        self.norm_k = nn.RMSNorm(dim, eps=EPS)

    def forward(self, x, freqs):
        b, s, d = x.shape
        hd = d // self.heads
        q = self.norm_q(self.q(x).float()).view(b, s, self.heads, hd)
        k = self.norm_k(self.k(x).float()).view(b, s, self.heads, hd)
        v = self.v(x)
        q = rope_apply(q, freqs).flatten(2)
        k = rope_apply(k, freqs).flatten(2)
        return self.o(attention(q, k, v, self.heads))


class WanCrossAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.norm_q = nn.RMSNorm(dim, eps=EPS)
        self.norm_k = nn.RMSNorm(dim, eps=EPS)

    def forward(self, x, context):
        q = self.norm_q(self.q(x).float())
        k = self.norm_k(self.k(context).float())
        v = self.v(context)
        return self.o(attention(q, k, v, self.heads))


class WanAttentionBlock(nn.Module):
    def __init__(self, dim: int, ffn: int, heads: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=EPS, elementwise_affine=False)
        self.self_attn = WanSelfAttention(dim, heads)
        self.norm3 = nn.LayerNorm(dim, eps=EPS, elementwise_affine=True)
        self.cross_attn = WanCrossAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=EPS, elementwise_affine=False)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn), nn.GELU(approximate="tanh"),
                                 nn.Linear(ffn, dim))
        self.modulation = nn.Parameter(torch.randn(1, 6, dim) / dim ** 0.5)

    def forward(self, x, e, context, freqs):
        """x [b, s, d] fp32 (the residual stream), e [b, 6, d] fp32 (time
        modulation), context [b, c, d] (text), freqs [2, s, head_dim/2]."""
        with fp32(x):
            e = (self.modulation + e).chunk(6, dim=1)
            y = self.norm1(x) * (1 + e[1]) + e[0]
        y = self.self_attn(y, freqs)
        with fp32(x):
            x = x + y.float() * e[2]
        x = x + self.cross_attn(self.norm3(x), context).float()
        with fp32(x):
            y = self.norm2(x) * (1 + e[4]) + e[3]
        y = self.ffn(y)
        with fp32(x):
            x = x + y.float() * e[5]
        return x


class Head(nn.Module):
    def __init__(self, dim: int, out_dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=EPS, elementwise_affine=False)
        self.head = nn.Linear(dim, out_dim)
        self.modulation = nn.Parameter(torch.randn(1, 2, dim) / dim ** 0.5)

    def forward(self, x, e):
        with fp32(x):
            e = (self.modulation + e.unsqueeze(1)).chunk(2, dim=1)
            y = self.norm(x) * (1 + e[1]) + e[0]
        return self.head(y)


class WanModel(nn.Module):
    def __init__(self, dim: int, ffn: int, heads: int, layers: int):
        super().__init__()
        self.dim, self.heads = dim, heads
        patch_dim = IN_CHANNELS * math.prod(PATCH)
        self.patch_embedding = nn.Linear(patch_dim, dim)
        self.text_embedding = nn.Sequential(nn.Linear(TEXT_DIM, dim), nn.GELU(approximate="tanh"),
                                            nn.Linear(dim, dim))
        self.time_embedding = nn.Sequential(nn.Linear(FREQ_DIM, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.time_projection = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        self.blocks = nn.ModuleList(WanAttentionBlock(dim, ffn, heads) for _ in range(layers))
        self.head = Head(dim, patch_dim)
        self._init_weights()

    def _init_weights(self):
        for module in self.blocks.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)
        nn.init.xavier_uniform_(self.patch_embedding.weight)
        for module in list(self.text_embedding) + list(self.time_embedding) + [self.head.head]:
            if isinstance(module, nn.Linear):
                # Wan zero-initialises the head; a small normal keeps every
                # gradient non-zero on the first step, which tests want.
                nn.init.normal_(module.weight, std=0.02)

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
        x = x.permute(0, 4, 1, 5, 2, 6, 3, 7)
        return x.reshape(b, c, f, h, w)

    def forward(self, video, t, context, freqs):
        """video [b, 16, F, H, W] noisy latents, t [b] in [0, 1000],
        context [b, c, 4096] text features -> predicted velocity like video."""
        x = self.patch_embedding(self.patchify(video))
        with fp32(x):
            e = self.time_embedding(sinusoidal_embedding(t, FREQ_DIM))
            e0 = self.time_projection(e).unflatten(1, (6, self.dim))
        context = self.text_embedding(context)
        x = x.float()
        for block in self.blocks:
            x = block(x, e0, context, freqs)
        out = self.head(x, e)
        return self.unpatchify(out.float(), video.shape)


def setup(size: str = "small", seed: int = 0, dtype: torch.dtype = torch.bfloat16,
          device: str = "cpu") -> sacplan_torch.Setup:
    """A seeded Wan-style model and a fixed flow-matching batch.

    dtype is the autocast dtype of the step (a torch.dtype or a name such as
    "bf16"); torch.float32 runs plain fp32 with no autocast. Parameters are
    fp32 either way.
    """
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, not {size!r}")
    cfg = SIZES[size]
    dtype = sacplan_torch.as_dtype(dtype)
    torch.manual_seed(int(seed))
    model = WanModel(cfg["dim"], cfg["ffn"], cfg["heads"], cfg["layers"]).to(device)

    generator = torch.Generator().manual_seed(int(seed) + 1)
    b = cfg["batch"]
    shape = (b, IN_CHANNELS, cfg["frames"], cfg["height"], cfg["width"])
    x0 = torch.randn(shape, generator=generator)
    noise = torch.randn(shape, generator=generator)
    t = torch.rand(b, generator=generator)
    x_t = (1 - t.view(b, 1, 1, 1, 1)) * x0 + t.view(b, 1, 1, 1, 1) * noise
    context = torch.randn(b, cfg["text_tokens"], TEXT_DIM, generator=generator)
    grid = (cfg["frames"] // PATCH[0], cfg["height"] // PATCH[1], cfg["width"] // PATCH[2])
    batch = dict(x_t=x_t, t=t * 1000, context=context, target=noise - x0,
                 freqs=rope_table(grid, cfg["dim"] // cfg["heads"]))
    batch = {key: value.to(device) for key, value in batch.items()}
    device_type = torch.device(device).type

    def step(m: nn.Module) -> torch.Tensor:
        autocast = (nullcontext() if dtype == torch.float32
                    else torch.autocast(device_type, dtype=dtype))
        with autocast:
            velocity = m(batch["x_t"], batch["t"], batch["context"], batch["freqs"])
            return F.mse_loss(velocity.float(), batch["target"])

    return sacplan_torch.Setup(
        model=model, step=step, blocks="blocks",
        make_optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-4),
        name=f"example-wan-{size}")


def main(argv=None) -> int:
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from walkthrough import walk
    return walk(setup, "Wan2.1-style DiT", argv)


if __name__ == "__main__":
    raise SystemExit(main())

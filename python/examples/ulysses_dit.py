"""A DiT-style transformer with Ulysses sequence parallelism and FSDP2, for
CPU ranks (torchrun + gloo).

Each block: LayerNorm -> qkv Linear -> all-to-all -> attention -> all-to-all
-> out Linear, residual; LayerNorm -> Linear -> GELU(tanh) -> Linear,
residual. fp32, no autocast, non-causal attention.

Ulysses (DeepSpeed-Ulysses; FastVideo uses the same scheme for video DiTs):
the ranks of a sequence-parallel group of size sp each hold tokens/sp of
the sequence. Before attention one all-to-all trades token chunks for head
chunks, so each rank holds every token for heads/sp heads; after attention a
second all-to-all trades them back. The all-to-alls are the autograd-aware
functional collectives (`_c10d_functional.all_to_all_single`), so their
backward is the reverse exchange and the capture sees them as ops of the
block.

Layout over the world of W ranks: sequence-parallel groups are sp
consecutive ranks; the W / sp groups are data parallel (each its own rows
of the global batch); FSDP2 shards every block and the root over all W
ranks. Rank r trains on rows [g * batch, (g+1) * batch) of the global batch,
g = r // sp, and tokens [s * T / sp, (s+1) * T / sp), s = r % sp. Its loss
is the mean over its slice; FSDP2 averages the gradients over the W ranks,
so the gradients are those of the mean loss over the whole global batch,
which one process computes with `setup(..., distributed=False,
global_batch=True)` (python/tests/test_ulysses.py checks this).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

import sacplan_torch

SIZES = {
    "small": dict(dim=64, ffn=256, heads=4, layers=3, batch=1, tokens=512, inputs=16),
    "large": dict(dim=96, ffn=384, heads=4, layers=4, batch=1, tokens=1024, inputs=16),
}
OUTPUTS = 16


def all_to_all(x: torch.Tensor, group) -> torch.Tensor:
    """Rank j of `group` receives chunk j of x's first dimension from every
    rank, stacked in rank order; autograd sends the gradients back."""
    from torch.distributed import _functional_collectives as funcol

    out = funcol.all_to_all_single_autograd(x, None, None, group)
    return out.wait() if isinstance(out, funcol.AsyncCollectiveTensor) else out


class UlyssesAttention(nn.Module):
    def __init__(self, dim: int, heads: int, sp: int, group):
        super().__init__()
        if heads % sp:
            raise ValueError(f"sp {sp} does not divide the {heads} heads")
        self.heads, self.sp, self.group = heads, sp, group
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        """x [b, tokens/sp, dim] -> [b, tokens/sp, dim]."""
        b, t_local, d = x.shape
        sp, local_heads = self.sp, self.heads // self.sp
        head_dim = d // self.heads
        qkv = self.qkv(self.norm(x)).view(b, t_local, 3, sp, local_heads, head_dim)
        if sp > 1:
            # Chunk j holds the heads rank j attends over; what arrives from
            # rank j is its tokens, so the tokens come back in order.
            send = qkv.permute(3, 0, 1, 2, 4, 5).contiguous()
            qkv = all_to_all(send, self.group).permute(1, 0, 2, 3, 4, 5)
        qkv = qkv.reshape(b, sp * t_local, 3, local_heads, head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)     # [b, heads/sp, tokens, hd]
        a = F.scaled_dot_product_attention(q, k, v)
        if sp > 1:
            send = a.view(b, local_heads, sp, t_local, head_dim).permute(2, 0, 3, 1, 4)
            a = all_to_all(send.contiguous(), self.group)   # [sp, b, t_local, heads/sp, hd]
            a = a.permute(1, 2, 0, 3, 4)
        else:
            a = a.transpose(1, 2)
        return self.out(a.reshape(b, t_local, d))


class MLP(nn.Module):
    def __init__(self, dim: int, ffn: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, ffn)
        self.fc2 = nn.Linear(ffn, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(self.norm(x)), approximate="tanh"))


class UlyssesBlock(nn.Module):
    def __init__(self, dim: int, ffn: int, heads: int, sp: int, group):
        super().__init__()
        self.attn = UlyssesAttention(dim, heads, sp, group)
        self.mlp = MLP(dim, ffn)

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.mlp(x)


class UlyssesDiT(nn.Module):
    def __init__(self, dim: int, ffn: int, heads: int, layers: int, inputs: int,
                 sp: int = 1, group=None):
        super().__init__()
        self.embed = nn.Linear(inputs, dim)
        self.blocks = nn.ModuleList(UlyssesBlock(dim, ffn, heads, sp, group)
                                    for _ in range(layers))
        self.head = nn.Linear(dim, OUTPUTS)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def global_batch(cfg: dict, dp: int, seed: int):
    """The global batch of one step: inputs and targets, [dp * batch, tokens, .]."""
    g = torch.Generator().manual_seed(int(seed) + 1)
    rows = dp * cfg["batch"]
    return (torch.randn(rows, cfg["tokens"], cfg["inputs"], generator=g),
            torch.randn(rows, cfg["tokens"], OUTPUTS, generator=g))


def setup(size: str = "small", sp: int = 1, fsdp: bool = True, seed: int = 0,
          distributed: Optional[bool] = None, global_batch_dp: int = 1,
          dtype=torch.float32) -> sacplan_torch.Setup:
    """The model as rank `torch.distributed.get_rank()` trains it.

    Inside a process group (distributed=None finds out): sequence-parallel
    groups of `sp` consecutive ranks, `fully_shard` per block and on the
    root when fsdp, this rank's rows and tokens of the global batch. Outside
    one (or distributed=False): one process, no collectives, the whole
    global batch of `global_batch_dp` data-parallel groups (the reference a
    run on W ranks with sp must equal: global_batch_dp = W / sp).
    dtype must be float32 (the example runs without autocast).
    """
    import torch.distributed as dist

    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, not {size!r}")
    if sacplan_torch.as_dtype(dtype) != torch.float32:
        raise ValueError("ulysses_dit runs in fp32 only")
    cfg = SIZES[size]
    sp = int(sp)
    if distributed is None:
        distributed = dist.is_available() and dist.is_initialized()
    group, rows, tokens = None, slice(None), slice(None)
    dp = int(global_batch_dp)
    world = 1
    if distributed:
        from torch.distributed.device_mesh import init_device_mesh

        world, rank = dist.get_world_size(), dist.get_rank()
        if world % sp:
            raise ValueError(f"sp {sp} does not divide the world size {world}")
        if cfg["tokens"] % sp:
            raise ValueError(f"sp {sp} does not divide the {cfg['tokens']} tokens")
        dp = world // sp
        mesh = init_device_mesh("cpu", (dp, sp), mesh_dim_names=("dp", "sp"))
        group = mesh.get_group("sp") if sp > 1 else None
        g, s = divmod(rank, sp)
        rows = slice(g * cfg["batch"], (g + 1) * cfg["batch"])
        chunk = cfg["tokens"] // sp
        tokens = slice(s * chunk, (s + 1) * chunk)
    elif sp != 1:
        raise ValueError("sp > 1 needs a torch.distributed process group")
    torch.manual_seed(int(seed))
    model = UlyssesDiT(cfg["dim"], cfg["ffn"], cfg["heads"], cfg["layers"], cfg["inputs"],
                       sp=sp, group=group)
    if distributed and fsdp:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        shard_mesh = init_device_mesh("cpu", (world,))
        for block in model.blocks:
            fully_shard(block, mesh=shard_mesh)
        fully_shard(model, mesh=shard_mesh)
    x, y = global_batch(cfg, dp, seed)
    x, y = x[rows, tokens].contiguous(), y[rows, tokens].contiguous()

    def step(m: nn.Module) -> torch.Tensor:
        return (m(x) - y).square().mean()

    return sacplan_torch.Setup(
        model=model, step=step, blocks="blocks",
        make_optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3),
        name=f"example-ulysses-{size}")

"""One rank of test_auto_checkpoint's torchrun case: auto_checkpoint on a
model written here, at a budget halfway between full's and none's peaks
(from a capture of a copy), then three training steps; writes this rank's
plan and losses to OUT/rank<r>.json."""

from __future__ import annotations

import copy
import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

import sacplan_torch
from rank_exit import exit_rank


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.down(torch.tanh(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self, dim: int = 32, blocks: int = 3):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim) for _ in range(blocks))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def main(out: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(2, 64, 32, generator=torch.Generator().manual_seed(1 + rank))

    def step(m):
        return m(x).square().mean()

    profile = sacplan_torch.capture(copy.deepcopy(model), step, blocks="blocks",
                                    warmup=0, repeats=1)
    budget = sum(sacplan_torch.plan(profile, preset=p)["predicted"]["peak_bytes"]
                 for p in ("none", "full")) // 2
    result = sacplan_torch.auto_checkpoint(model, step, budget, blocks="blocks",
                                           optimizer=optimizer, warmup=0, repeats=1)
    losses = []
    for _ in range(3):
        loss = step(model)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"plan": result.plan, "captured": result.captured, "losses": losses}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
    exit_rank(0)

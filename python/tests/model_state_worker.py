"""One rank of test_model_state's FSDP2 case: the toy transformer with each
block and the root under fully_shard (2 gloo ranks), AdamW stepped once
and gradients left on every block but the first, then auto_checkpoint;
writes OUT/rank<r>.json with how many parameters are DTensors and what of
this rank's shards, gradients, optimizer state and generators changed."""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

import sacplan_torch
import toy_transformer
from rank_exit import exit_rank
from sacplan_torch.distributed import local
from test_model_state import differences, everything


def main(out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    model = toy_transformer.make_net(dim=16, heads=2, hidden=40, blocks=3, inputs=8, outputs=4)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(1 + rank))

    def step(m):
        return m(x).square().mean()

    step(model).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    step(model).backward()
    for p in model.blocks[0].parameters():
        p.grad = None
    before = everything(model, optimizer, view=local)
    sacplan_torch.auto_checkpoint(model, step, "1GB", blocks="blocks", optimizer=optimizer,
                                  warmup=0, repeats=1)
    params = list(model.parameters())
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"params": len(params),
                   "sharded": sum(isinstance(p, DTensor) for p in params),
                   "differences": differences(before, everything(model, optimizer, view=local))},
                  f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
    exit_rank(0)

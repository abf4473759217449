"""auto_checkpoint under FSDP2: the Wan-style example on 2 CPU ranks.

    torchrun --nproc_per_node 2 python/examples/fsdp_auto_checkpoint.py [--budget 30MB]

Every rank builds the same seeded model, shards each block and the root with
`fully_shard` on a CPU mesh (gloo), and calls auto_checkpoint once: every
rank captures (FSDP2's all-gathers need them all), rank 0 plans for the
budget per rank and broadcasts the plan, and every rank applies it. Then a
few training steps, and on rank 0 the plan's decisions and its predicted
peak beside the measured one. On GPUs, use nccl and device "cuda".
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wan_block  # noqa: E402

import sacplan_torch  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", default="30MB", help="peak memory per rank")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--size", default="small", choices=sorted(wan_block.SIZES))
    parser.add_argument("--report", help="rank 0 writes the figures here as JSON")
    ns = parser.parse_args(argv)

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    setup = wan_block.setup(ns.size, dtype=torch.float32)
    for block in setup.model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(setup.model, mesh=mesh)
    optimizer = setup.make_optimizer(setup.model)

    result = sacplan_torch.auto_checkpoint(setup.model, setup.step, ns.budget,
                                           blocks=setup.blocks, optimizer=optimizer,
                                           name=setup.name, warmup=0, repeats=1)
    measured = sacplan_torch.measure_peak(setup.model, setup.step, optimizer=optimizer,
                                          steps=ns.steps)
    if rank == 0:
        for d in result.decisions:
            print(f"block {d.index}: {'checkpointed' if d.checkpoint else 'kept'}, "
                  f"{len(d.save)} ops saved, {len(d.recompute)} recomputed")
        print(f"rank 0: predicted {result.predicted_peak_bytes / 1e6:.2f} MB peak, "
              f"measured {measured.peak_bytes / 1e6:.2f} MB; losses "
              + ", ".join(f"{loss:.5f}" for loss in measured.losses))
        if ns.report:
            with open(ns.report, "w") as f:
                json.dump({"budget": ns.budget, "predicted_peak_bytes": result.predicted_peak_bytes,
                           "measured_peak_bytes": measured.peak_bytes,
                           "checkpointed": [d.checkpoint for d in result.decisions],
                           "losses": measured.losses}, f)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

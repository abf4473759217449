"""FSDP2 + apply_plan on CPU ranks; launched by test_fsdp.py through torchrun.

    python -m torch.distributed.run --nproc_per_node 2 tests/fsdp_worker.py OUT.pt

For each case in CASES every rank builds the same fp32 model (seeded), shards
each block and the root with `fully_shard` on a CPU device mesh (gloo), applies
the case's plan before or after sharding, and trains STEPS SGD steps. Rank r
trains on its own slice r of one global batch; each rank's loss is the mean
over its slice and FSDP2 averages the gradients over ranks, so the gradients
are those of the mean loss over the whole global batch, which one process
without FSDP computes on the global batch (reference() below, run by the
test). Rank 0 writes, per case and step, the mean of the ranks' losses, the
full gradients (DTensor.full_tensor()), the parameters after the last step,
and how many matmuls (aten.addmm) and attentions ran in the forward and in
the backward of each step. The worker itself asserts that a plan with
checkpointed blocks re-ran matmuls in backward, and that without a plan
nothing is re-run.

The orders: "apply_then_shard" is what TorchTitan does (activation
checkpointing first, then fully_shard); "shard_then_apply" applies the plan
to blocks that are already FSDPModules.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from typing import Dict, List

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from rank_exit import exit_rank
import toy_transformer
from toy_transformer import Net

DIM, HEADS, HIDDEN = 16, 2, 40
LOCAL_BATCH, TOKENS, IN, OUT = 2, 6, 8, 4
NBLOCKS = 3
STEPS = 2
LR = 0.1
WORLD = 2

MATMULS = ["attn.qkv.addmm", "attn.out.addmm", "mlp.fc1.addmm", "mlp.fc2.addmm"]
# The CPU kernel F.scaled_dot_product_attention dispatches to for fp32.
ATTENTION_OP = "_scaled_dot_product_flash_attention_for_cpu"


def make_net() -> Net:
    return toy_transformer.make_net(dim=DIM, heads=HEADS, hidden=HIDDEN, blocks=NBLOCKS,
                                    inputs=IN, outputs=OUT)


def global_batch(step: int):
    g = torch.Generator().manual_seed(100 + step)
    return (torch.randn(WORLD * LOCAL_BATCH, TOKENS, IN, generator=g),
            torch.randn(WORLD * LOCAL_BATCH, TOKENS, OUT, generator=g))


def loss_of(net: nn.Module, x, y) -> torch.Tensor:
    return (net(x) - y).square().mean()


def plan(saves: List[List[str]], checkpoint: List[bool]) -> Dict:
    net = make_net()
    return {
        "schema": "sacplan.plan/1",
        "model": "fsdp-test-net",
        "semantics": "torch-sac",
        "model_config": {
            "framework": "pytorch",
            "blocks": NBLOCKS,
            "block_type": "Block",
            "block_param_count": sum(p.numel() for p in net.blocks[0].parameters()),
            "param_count": sum(p.numel() for p in net.parameters()),
            # What one rank's blocks carry: the local batch.
            "carried_shape": [LOCAL_BATCH, TOKENS, DIM],
            "carried_dtype": "float32",
        },
        "blocks": [{"index": i, "save": s, "checkpoint": c}
                   for i, (s, c) in enumerate(zip(saves, checkpoint))],
    }


# name -> (order, save lists, checkpoint flags); None: FSDP2 without a plan.
CASES = {
    "no_plan": None,
    "full/apply_then_shard": ("apply_then_shard", [[]] * NBLOCKS, [True] * NBLOCKS),
    "full/shard_then_apply": ("shard_then_apply", [[]] * NBLOCKS, [True] * NBLOCKS),
    "attention/apply_then_shard": ("apply_then_shard", [[f"attn.{ATTENTION_OP}"]] * NBLOCKS,
                                   [True] * NBLOCKS),
    "mixed/shard_then_apply": ("shard_then_apply",
                               [MATMULS + [f"attn.{ATTENTION_OP}"], [], ["mlp.fc1.addmm"]],
                               [True, False, True]),
}


class OpCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.counts: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def reference() -> Dict:
    """One process, no FSDP, no plan, the global batch: what every case must give."""
    net = make_net()
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    out = {"losses": [], "grads": []}
    for step in range(STEPS):
        x, y = global_batch(step)
        opt.zero_grad(set_to_none=True)
        loss = loss_of(net, x, y)
        loss.backward()
        out["losses"].append(loss.item())
        out["grads"].append({n: p.grad.detach().clone() for n, p in net.named_parameters()})
        opt.step()
    out["params"] = {n: p.detach().clone() for n, p in net.named_parameters()}
    return out


def run_case(case, mesh, rank: int) -> Dict:
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    from sacplan_torch import apply_plan

    net = make_net()
    order = None if case is None else case[0]
    if order == "apply_then_shard":
        apply_plan(net, plan(case[1], case[2]), blocks="blocks", model_name="fsdp-test-net")
    for block in net.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(net, mesh=mesh)
    if order == "shard_then_apply":
        apply_plan(net, plan(case[1], case[2]), blocks="blocks", model_name="fsdp-test-net")

    opt = torch.optim.SGD(net.parameters(), lr=LR)
    out = {"losses": [], "grads": [], "forward": [], "backward": []}
    for step in range(STEPS):
        x, y = global_batch(step)
        rows = slice(rank * LOCAL_BATCH, (rank + 1) * LOCAL_BATCH)
        opt.zero_grad(set_to_none=True)
        forward, backward = OpCounter(), OpCounter()
        with forward:
            loss = loss_of(net, x[rows], y[rows])
        with backward:
            loss.backward()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        out["losses"].append(mean_loss.item() / WORLD)
        out["grads"].append({n: p.grad.full_tensor() for n, p in net.named_parameters()})
        out["forward"].append({k: forward.counts[k] for k in ("addmm", ATTENTION_OP)})
        out["backward"].append({k: backward.counts[k] for k in ("addmm", ATTENTION_OP)})
        opt.step()
    out["params"] = {n: p.full_tensor().detach() for n, p in net.named_parameters()}

    # The plan really checkpointed: the backward re-ran matmuls (backward of
    # a Linear itself runs aten.mm, never addmm) exactly when a block is
    # checkpointed with a matmul left unsaved.
    recomputes = case is not None and any(
        c and set(MATMULS) - set(s) for s, c in zip(case[1], case[2]))
    for step, counts in enumerate(out["backward"]):
        if recomputes:
            assert counts["addmm"] > 0, f"rank {rank} step {step}: nothing recomputed: {counts}"
        else:
            assert counts["addmm"] == 0, f"rank {rank} step {step}: recomputed: {counts}"
    return out


def main(argv: List[str]) -> int:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(1)
    out_path = argv[1]
    names = argv[2:] or list(CASES)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    assert dist.get_world_size() == WORLD
    mesh = init_device_mesh("cpu", (WORLD,))
    results = {}
    try:
        for name in names:
            results[name] = run_case(CASES[name], mesh, rank)
            dist.barrier()
        if rank == 0:
            tmp = out_path + ".tmp"
            torch.save(results, tmp)
            os.replace(tmp, out_path)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    exit_rank(main(sys.argv))

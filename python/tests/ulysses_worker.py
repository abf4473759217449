"""Ulysses sequence parallel + FSDP2 on CPU ranks; launched by test_ulysses.py.

    python -m torch.distributed.run --nproc_per_node W tests/ulysses_worker.py \
        parity SP OUT.pt
    python -m torch.distributed.run --nproc_per_node W tests/ulysses_worker.py \
        memory SP SIZE DIR SACPLAN_BIN

parity: every rank builds python/examples/ulysses_dit.py (seeded, its rows
and tokens of the global batch, fully_shard per block and root) and trains
STEPS SGD steps for each case of CASES. Rank 0 writes, per case and step,
the mean of the ranks' losses, the full gradients (DTensor.full_tensor()) and
how many `_c10d_functional` calls each rank's backward made.

memory: every rank captures its own profile (DIR/profile.rank<r>.json);
rank 0 plans with the sacplan CLI (none, full, and the optimal plan at the
budget halfway between their predicted peaks) from its profile; every rank
simulates every plan on its own profile, applies it to a fresh model and
measures its peak. Each rank writes DIR/result.rank<r>.json.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))

import sacplan_torch  # noqa: E402
from rank_exit import exit_rank  # noqa: E402
import ulysses_dit  # noqa: E402
from sacplan_torch.naming import is_collective  # noqa: E402

STEPS = 2
LR = 0.1
SIZE = "small"


class CollectiveCounter(TorchDispatchMode):
    """Counts the calls apply_plan treats as collectives, by name
    (all_to_all_single, wait_tensor)."""

    def __init__(self):
        super().__init__()
        self.counts: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if is_collective(func):
            self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def full_plan(setup) -> Dict:
    """Every block checkpointed, nothing saved but what apply_plan always saves."""
    from sacplan_torch.plan_doc import model_fingerprint

    found = sacplan_torch.find_blocks(setup.model, setup.blocks)
    config = model_fingerprint(setup.model, found)
    return {"schema": "sacplan.plan/1", "model": setup.name, "semantics": "torch-sac",
            "model_config": config,
            "blocks": [{"index": i, "save": [], "checkpoint": True}
                       for i in range(len(found))]}


def plain_checkpoint(setup) -> None:
    """torch.utils.checkpoint on every block with no policy: the control
    whose recompute re-issues the all-to-alls."""
    for _, block in sacplan_torch.find_blocks(setup.model, setup.blocks):
        original = block.forward
        block.forward = functools.partial(checkpoint, original, use_reentrant=False)


CASES = {
    "no_plan": lambda setup: None,
    "full_plan": lambda setup: sacplan_torch.apply_plan(setup.model, full_plan(setup),
                                                        blocks=setup.blocks),
    "plain_checkpoint": plain_checkpoint,
}


def parity(sp: int, out_path: str) -> None:
    import torch.distributed as dist

    results = {}
    for case, prepare in CASES.items():
        setup = ulysses_dit.setup(SIZE, sp=sp)
        prepare(setup)
        opt = torch.optim.SGD(setup.model.parameters(), lr=LR)
        got = {"losses": [], "grads": [], "backward_collectives": [],
               "forward_collectives": []}
        for _ in range(STEPS):
            opt.zero_grad(set_to_none=True)
            forward, backward = CollectiveCounter(), CollectiveCounter()
            with forward:
                loss = setup.step(setup.model)
            with backward:
                loss.backward()
            mean_loss = loss.detach().clone()
            dist.all_reduce(mean_loss)
            got["losses"].append(mean_loss.item() / dist.get_world_size())
            got["grads"].append({n: p.grad.full_tensor()
                                 for n, p in setup.model.named_parameters()})
            counts = [None] * dist.get_world_size()
            dist.all_gather_object(counts, dict(backward.counts))
            got["backward_collectives"].append(counts)
            got["forward_collectives"].append(dict(forward.counts))
            opt.step()
        results[case] = got
        dist.barrier()
    if dist.get_rank() == 0:
        torch.save(results, f"{out_path}.tmp")
        os.replace(f"{out_path}.tmp", out_path)


def _write(path: str, doc) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


def _cli(binary: str, *args: str) -> str:
    done = subprocess.run([binary, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"sacplan {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def memory(sp: int, size: str, out_dir: str, binary: str) -> None:
    import torch.distributed as dist

    rank = dist.get_rank()
    out = Path(out_dir)
    profile = str(out / f"profile.rank{rank}.json")
    setup = ulysses_dit.setup(size, sp=sp)
    sacplan_torch.capture(setup.model, setup.step, blocks=setup.blocks,
                          optimizer=setup.make_optimizer(setup.model), name=setup.name,
                          path=profile, warmup=1, repeats=1, sp=sp)
    del setup
    dist.barrier()
    labels = ["none", "full", "optimal"]
    if rank == 0:
        plans = {}
        for preset in ("none", "full"):
            path = str(out / f"{preset}.plan.json")
            _cli(binary, "plan", "--profile", profile, "--semantics", "torch-sac",
                 "--preset", preset, "-o", path)
            with open(path, encoding="utf-8") as f:
                plans[preset] = json.load(f)["predicted"]["peak_bytes"]
        budget = (plans["none"] + plans["full"]) // 2
        _cli(binary, "plan", "--profile", profile, "--semantics", "torch-sac",
             "--budget", str(budget), "-o", str(out / "optimal.plan.json"))
    dist.barrier()
    rows: Dict[str, List[int]] = {}
    for label in labels:
        plan_path = str(out / f"{label}.plan.json")
        predicted = json.loads(_cli(binary, "simulate", "--profile", profile,
                                    "--plan", plan_path, "--json"))
        fresh = ulysses_dit.setup(size, sp=sp)
        sacplan_torch.apply_plan(fresh.model, plan_path, blocks=fresh.blocks,
                                 model_name=fresh.name)
        measured = sacplan_torch.measure_peak(
            fresh.model, fresh.step, optimizer=fresh.make_optimizer(fresh.model), steps=1,
            timed=False)
        rows[label] = [int(predicted["peak_bytes"]), int(measured.peak_bytes)]
        del fresh
        dist.barrier()
    _write(str(out / f"result.rank{rank}.json"), rows)


def main(argv: List[str]) -> int:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    try:
        if argv[1] == "parity":
            parity(int(argv[2]), argv[3])
        elif argv[1] == "memory":
            memory(int(argv[2]), argv[3], argv[4], argv[5])
        else:
            raise SystemExit(f"unknown mode {argv[1]}")
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    exit_rank(main(sys.argv))

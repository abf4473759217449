"""Ulysses sequence parallel + FSDP2 (python/examples/ulysses_dit.py) on CPU
ranks: training equals one process, and checkpointing never re-issues a
collective in backward. ulysses_worker.py runs the ranks (torchrun, gloo)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import ulysses_worker as worker
from torchrun import assert_same_steps, torchrun

WORKER = Path(__file__).with_name("ulysses_worker.py")
TIMEOUT_S = 300
# Against one process; the all-to-alls reorder more sums than FSDP does.
RTOL = 1e-4
# (world size, sequence-parallel degree): pure SP on 2 ranks; 2 data-parallel
# groups of SP 2 on 4 ranks.
LAYOUTS = [(2, 2), (4, 2)]


def run_worker(world: int, args, port: int) -> None:
    torchrun(WORKER, world, args, port, TIMEOUT_S)


@pytest.fixture(scope="module", params=LAYOUTS, ids=lambda l: f"world{l[0]}-sp{l[1]}")
def layout(request, tmp_path_factory, free_port):
    world, sp = request.param
    out = tmp_path_factory.mktemp(f"ulysses{world}") / "parity.pt"
    run_worker(world, ["parity", sp, out], free_port + world)
    return world, sp, torch.load(out, weights_only=True)


def reference(dp: int) -> dict:
    """One process, no collectives, no FSDP, no plan, the whole global batch."""
    setup = worker.ulysses_dit.setup(worker.SIZE, distributed=False, global_batch_dp=dp)
    opt = torch.optim.SGD(setup.model.parameters(), lr=worker.LR)
    out = {"losses": [], "grads": []}
    for _ in range(worker.STEPS):
        opt.zero_grad(set_to_none=True)
        loss = setup.step(setup.model)
        loss.backward()
        out["losses"].append(loss.item())
        out["grads"].append({n: p.grad.detach().clone()
                             for n, p in setup.model.named_parameters()})
        opt.step()
    return out


@pytest.mark.parametrize("case", ["no_plan", "full_plan"])
def test_training_equals_one_process(layout, case):
    world, sp, results = layout
    expected = reference(world // sp)
    got = results[case]
    assert_same_steps(got, expected, worker.STEPS, RTOL)


def test_backward_never_reissues_collectives(layout):
    """The backward of a block exchanges its gradients through one
    all-to-all per forward all-to-all. Under apply_plan (every block
    checkpointed) that is all it issues; plain checkpointing re-runs the
    forward's all-to-alls too, which shows the counter can see them."""
    world, sp, results = layout
    blocks = worker.ulysses_dit.SIZES[worker.SIZE]["layers"]
    for step in range(worker.STEPS):
        forward = results["no_plan"]["forward_collectives"][step]
        assert forward["all_to_all_single"] == 2 * blocks
        for rank in range(world):
            plain = results["no_plan"]["backward_collectives"][step][rank]
            planned = results["full_plan"]["backward_collectives"][step][rank]
            control = results["plain_checkpoint"]["backward_collectives"][step][rank]
            for name in ("all_to_all_single", "wait_tensor"):
                assert plain[name] == 2 * blocks, (rank, name, plain)
                assert planned.get(name, 0) == plain[name], (rank, name, planned)
                assert control.get(name, 0) == 2 * plain[name], (rank, name, control)


# Per-rank peaks: (size, world size, sp). Two sizes, 2 and 4 ranks.
MEMORY_CASES = [(size, world, sp) for size in ("small", "large")
                for world, sp in ((2, 2), (4, 4))]
TOLERANCE = 0.03


@pytest.mark.parametrize("size,world,sp", MEMORY_CASES)
def test_measured_peak_per_rank_matches_prediction(size, world, sp, tmp_path, free_port):
    """Every rank captures its own profile; the none, full and optimal plans
    made from rank 0's profile are applied on every rank; each rank's
    measured peak is within 3% of `sacplan simulate` on its own profile."""
    from sacplan_cli import sacplan_binary

    run_worker(world, ["memory", sp, size, tmp_path, sacplan_binary()],
             free_port + 10 + world + (0 if size == "small" else 20))
    rows = {}
    for rank in range(world):
        with open(tmp_path / f"result.rank{rank}.json", encoding="utf-8") as f:
            for label, (predicted, measured) in json.load(f).items():
                rows[(rank, label)] = (predicted, measured)
    table = "\n".join(f"  rank {r} {label:8s} predicted {p:>11,d}  measured {m:>11,d}  "
                      f"{100 * (p - m) / m:+.2f}%" for (r, label), (p, m) in rows.items())
    print(f"\nulysses {size} world {world} sp {sp}:\n{table}")
    for key, (predicted, measured) in rows.items():
        assert abs(predicted - measured) <= TOLERANCE * measured, f"{key}\n{table}"
    for rank in range(world):
        # The plans span a real range, or matching them proves little.
        assert rows[(rank, "none")][1] > 1.2 * rows[(rank, "full")][1], table
        check_profile(tmp_path / f"profile.rank{rank}.json", size, world, sp)


def check_profile(path, size: str, world: int, sp: int) -> None:
    """What one rank's profile says about the parallel layout, against the
    model's own sizes (every dimension of the example divides by 4, so
    FSDP2 pads nothing and the all-gather output is the block's fp32
    parameters)."""
    with open(path, encoding="utf-8") as f:
        profile = json.load(f)
    cfg = worker.ulysses_dit.SIZES[size]
    assert profile["parallel"] == {"world_size": world, "fsdp": True, "sp": sp}
    d, ffn = cfg["dim"], cfg["ffn"]
    block_bytes = 4 * (d * 3 * d + 3 * d + d * d + d + d * ffn + ffn + ffn * d + d + 4 * d)
    # The root (embed before the blocks, head after) stays unsharded all
    # step, and so do its gradients until its reduce-scatter.
    embed_bytes = 4 * (cfg["inputs"] * d + d)
    head_bytes = 4 * (d * worker.ulysses_dit.OUTPUTS + worker.ulysses_dit.OUTPUTS)
    fixed = profile["fixed"]
    assert fixed["fsdp_root_param_bytes"] == embed_bytes + head_bytes
    assert fixed["embedding_grad_bytes"] == embed_bytes
    assert fixed["nonblock_grad_bytes"] == head_bytes
    for block in profile["blocks"]:
        fsdp = block["fsdp"]
        assert fsdp["unsharded_param_bytes"] == block_bytes
        assert fsdp["reduce_scatter_bytes"] == block_bytes
        assert fsdp["sharded_grad_bytes"] == block_bytes // world
        assert fsdp["all_gather_ms"] > 0 and fsdp["reduce_scatter_ms"] > 0
        # The gradients the block's backward allocates are unsharded.
        assert sum(op["param_bytes"] for op in block["ops"]) == block_bytes
        exchanges = [op for op in block["ops"] if op.get("collective")]
        assert [op["kind"] for op in exchanges] == ["all_to_all", "all_to_all"]
        # Their outputs carry gradients back (the autograd-aware all-to-all
        # runs with grad mode off inside its autograd Function).
        assert all(op["outputs"][0]["requires_grad"] for op in exchanges)
        # Before attention: q, k, v of all tokens for heads / sp heads.
        tokens, head_dim = cfg["tokens"], d // cfg["heads"]
        assert exchanges[0]["outputs"][0]["bytes"] == 4 * 3 * tokens * (cfg["heads"] // sp) \
            * head_dim * cfg["batch"]


@pytest.mark.parametrize("sp,message", [(2, "sp 2 is larger than the world size 1"),
                                        (0, "sp must be an integer >= 1")])
def test_capture_refuses_an_sp_the_ranks_cannot_have(sp, message):
    setup = worker.ulysses_dit.setup(worker.SIZE, distributed=False)
    with pytest.raises(worker.sacplan_torch.SacplanError, match=message):
        worker.sacplan_torch.capture(setup.model, setup.step, blocks=setup.blocks, sp=sp)

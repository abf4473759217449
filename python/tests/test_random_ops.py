"""Plans for blocks that draw random numbers change no gradient.

PyTorch's checkpoint restores the generator to its state at the block's
start before the re-run, and a saved (cached) call draws nothing there, so a
recomputed random call draws the forward's numbers only when every random
call before it is recomputed too (docs/memory_model.md, "Random ops"). The
blocks here are written in the test: "two" has two dropouts written with
torch.rand_like (savable random calls, as CUDA's native_dropout is), after
attention and after the MLP; "three" draws a torch.rand stochastic-depth
mask first, then F.dropout (on the CPU an in-place bernoulli_, never
savable) and a rand_like dropout. Every plan the solver emits over a sweep of
budgets, and every preset, must give plain autograd's gradients (1e-5,
float32); a hand-edited plan that saves a random op and recomputes a later
one is refused by apply_plan and by `sacplan simulate`.
"""

from __future__ import annotations

import functools
import json
import subprocess

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                    create_selective_checkpoint_contexts)

import sacplan_cli
from toy_transformer import MLP, Attention

from sacplan_torch import SacplanError, apply_plan, capture
from sacplan_torch.naming import OpNamer, is_named, is_random

DIM, HEADS, HIDDEN, NBLOCKS = 16, 2, 32, 3
BATCH, TOKENS = 4, 8
P = 0.3
RANDOM_ATEN = {"rand", "rand_like", "bernoulli"}


def rand_dropout(x: torch.Tensor) -> torch.Tensor:
    return x * (torch.rand_like(x) >= P).to(x.dtype) / (1 - P)


class RandomBlock(nn.Module):
    def __init__(self, draws: int):
        super().__init__()
        self.draws = draws
        self.attn = Attention(DIM, HEADS)
        self.mlp = MLP(DIM, HIDDEN)

    def forward(self, x):
        if self.draws == 2:
            x = x + rand_dropout(self.attn(x))
            return x + rand_dropout(self.mlp(x))
        keep = (torch.rand(x.shape[0], 1, 1) >= P).to(x.dtype) / (1 - P)
        x = x + keep * F.dropout(self.attn(x), P, self.training)
        return x + rand_dropout(self.mlp(x))


class RandomNet(nn.Module):
    def __init__(self, draws: int):
        super().__init__()
        self.embed = nn.Linear(DIM, DIM)
        self.blocks = nn.ModuleList(RandomBlock(draws) for _ in range(NBLOCKS))
        self.head = nn.Linear(DIM, DIM)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def make_net(draws: int) -> RandomNet:
    torch.manual_seed(0)
    return RandomNet(draws)


BATCH_X = torch.randn(BATCH, TOKENS, DIM, generator=torch.Generator().manual_seed(1))


def gradients(net: nn.Module) -> dict:
    torch.manual_seed(123)
    net(BATCH_X).square().mean().backward()
    grads = {name: p.grad.clone() for name, p in net.named_parameters()}
    net.zero_grad(set_to_none=True)
    return grads


def assert_same(grads: dict, expected: dict, what: str) -> None:
    for name, grad in expected.items():
        torch.testing.assert_close(grads[name], grad, rtol=1e-5, atol=1e-5,
                                   msg=lambda m: f"{what}: {name}: {m}")


@pytest.fixture(scope="module", params=[2, 3], ids=["two", "three"])
def captured(request, tmp_path_factory):
    draws = request.param
    path = str(tmp_path_factory.mktemp(f"random{draws}") / "profile.json")
    profile = capture(make_net(draws), BATCH_X, blocks="blocks", path=path,
                      warmup=0, repeats=1)
    return draws, path, profile


def random_ops(profile: dict) -> list:
    return [op["id"] for op in profile["blocks"][0]["ops"] if op.get("random")]


def test_capture_marks_every_random_op(captured):
    draws, _, profile = captured
    ops = profile["blocks"][0]["ops"]
    marked = {op["id"] for op in ops if op.get("random")}
    drawing = {op["id"] for op in ops if op["aten"].rstrip("_") in RANDOM_ATEN}
    assert marked == drawing
    assert len(marked) == draws


def solver_plans(path: str, tmp_path) -> list:
    """Plans of every preset and of the solver over a sweep of budgets."""
    plans = [sacplan_cli.plan(path, str(tmp_path / f"{preset}.json"), preset=preset)
             for preset in ("none", "full", "torchtitan", "attn_only", "megatron",
                            "every_nth:2")]
    low = plans[1]["predicted"]["peak_bytes"]
    high = plans[0]["predicted"]["peak_bytes"]
    for k in range(7):
        budget = low + (high - low) * k // 6
        plans.append(sacplan_cli.plan(path, str(tmp_path / f"b{k}.json"), budget=budget))
    return plans


def test_every_plan_keeps_plain_autograds_gradients(captured, tmp_path):
    draws, path, profile = captured
    expected = gradients(make_net(draws))
    plans = solver_plans(path, tmp_path)
    save_sets = set()
    for plan in plans:
        net = make_net(draws)
        applied = apply_plan(net, plan, blocks="blocks")
        assert_same(gradients(net), expected, f"{plan['method']} {plan.get('budget_bytes')}")
        applied.remove()
        save_sets.add(json.dumps([b["save"] for b in plan["blocks"]]))
    assert len(save_sets) >= 3, "the sweep must reach several different plans"


def save_first_random_op(profile: dict, path: str) -> dict:
    """A plan that checkpoints every block and saves only its first random op."""
    first = random_ops(profile)[0]
    plan = sacplan_cli.plan(path, path + ".full.json", preset="full")
    for block in plan["blocks"]:
        block["save"] = [first]
        block["recompute"].remove(first)
    return plan


def test_saving_a_random_op_before_a_recomputed_one_changes_gradients(captured):
    """What the guard prevents: PyTorch's selective checkpointing, told to
    cache the first random op and recompute the second, silently computes
    other gradients."""
    draws, _, profile = captured
    first = random_ops(profile)[0]
    expected = gradients(make_net(draws))
    net = make_net(draws)
    for block in net.blocks:
        namer = OpNamer(block)
        original = block.forward

        def policy(ctx, func, *args, namer=namer, **kwargs):
            if is_named(func) and namer.name(func) == first:
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE

        def run(x, namer=namer, original=original):
            namer.reset()
            return original(x)

        block.forward = functools.partial(
            checkpoint, run, use_reentrant=False,
            context_fn=functools.partial(create_selective_checkpoint_contexts, policy))
    grads = gradients(net)
    assert any((grads[n] - g).abs().max() > 1e-4 for n, g in expected.items())


def test_apply_plan_refuses_a_plan_that_draws_other_numbers(captured):
    draws, path, profile = captured
    plan = save_first_random_op(profile, path)
    net = make_net(draws)
    apply_plan(net, plan, blocks="blocks")
    # The planner's rule and message, as `sacplan simulate` refuses the plan
    # with the profile (below).
    second = random_ops(profile)[1]
    with pytest.raises(SacplanError, match=rf"^plan block 0 recomputes random op '{second}' "
                                           r"after saving an earlier one"):
        net(BATCH_X)
    with pytest.raises(SacplanError):
        net(BATCH_X)  # stays refused


def test_simulate_refuses_a_plan_that_draws_other_numbers(captured):
    _, path, profile = captured
    plan_path = path + ".edited.json"
    with open(plan_path, "w", encoding="utf-8") as f:
        json.dump(save_first_random_op(profile, path), f)
    done = subprocess.run([sacplan_cli.sacplan_binary(), "simulate", "--profile", path,
                           "--plan", plan_path], capture_output=True, text=True)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    second = random_ops(profile)[1]
    assert len(lines) == 1 and f"plan block 0 recomputes random op '{second}'" in lines[0], \
        done.stderr


def test_attention_draws_only_with_dropout():
    """SDPA's kernels carry the random tag for their dropout: without
    dropout they draw nothing and must stay savable."""
    aten = torch.ops.aten
    q = torch.randn(1, 2, 4, 8)
    for attention in (aten._scaled_dot_product_flash_attention_for_cpu.default,
                      aten._scaled_dot_product_efficient_attention.default):
        assert not is_random(attention, (q, q, q), {})
        assert is_random(attention, (q, q, q), {"dropout_p": 0.1})
    assert is_random(aten._scaled_dot_product_flash_attention_for_cpu.default, (q, q, q, 0.1))
    assert is_random(aten.native_dropout.default, (q, 0.1, True))
    assert is_random(aten.randn.default, ([2],))
    assert not is_random(aten.mm.default, (q, q))

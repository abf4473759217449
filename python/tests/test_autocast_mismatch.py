"""A plan holds only under the autocast its profile was captured under
(issue 41, item 7a): autocast decides the activations' dtypes, the weight
casts it caches, and so the op ids, bytes and times the plan was made from.
Capture records the dtype autocast cast to on the blocks' device
(`model_config.autocast_dtype`, null without autocast); a block of the
applied plan that trains under another raises one SacplanError naming
both. A small model written here, captured on CPU in fp32 and under bf16
autocast."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import sacplan_torch
from sacplan_torch import SacplanError

DIM, TOKENS = 16, 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(DIM, 2 * DIM)
        self.fc2 = nn.Linear(2 * DIM, DIM)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x))).float()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(3))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


BATCH = torch.randn(2, TOKENS, DIM, generator=torch.Generator().manual_seed(0))


def step_under(dtype):
    def step(model):
        with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            return model(BATCH).float().square().mean()
    return step


@pytest.fixture(scope="module")
def plans():
    """Per capture dtype (None: no autocast), a plan that checkpoints every
    block and one that checkpoints none."""
    made = {}
    for dtype in (None, torch.bfloat16):
        torch.manual_seed(0)
        profile = sacplan_torch.capture(Net(), step_under(dtype), blocks="blocks", warmup=0,
                                        repeats=1)
        made[dtype] = {preset: sacplan_torch.plan(profile, preset=preset)
                       for preset in ("full", "none")}
    return made


def applied(plan):
    torch.manual_seed(0)
    model = Net()
    sacplan_torch.apply_plan(model, plan, blocks="blocks")
    return model


def test_capture_records_the_autocast_dtype(plans):
    assert plans[None]["full"]["model_config"]["autocast_dtype"] is None
    assert plans[torch.bfloat16]["full"]["model_config"]["autocast_dtype"] == "bfloat16"


@pytest.mark.parametrize("preset", ["full", "none"])
def test_a_step_under_another_autocast_is_refused(plans, preset):
    model = applied(plans[None][preset])
    step_under(None)(model).backward()  # as captured
    with pytest.raises(SacplanError, match=r"^plan is for another autocast dtype: its profile "
                       r"was captured under no autocast, blocks\[0\] \(blocks\.0\) runs under "
                       r"autocast bfloat16 here; capture the step as it trains"):
        step_under(torch.bfloat16)(model)

    model = applied(plans[torch.bfloat16][preset])
    step_under(torch.bfloat16)(model).backward()
    with pytest.raises(SacplanError, match=r"captured under autocast bfloat16, blocks\[0\] "
                       r"\(blocks\.0\) runs under no autocast here"):
        step_under(None)(model)
    with pytest.raises(SacplanError, match=r"under autocast bfloat16, .* runs under autocast "
                       r"float16 here"):
        step_under(torch.float16)(model)


def test_what_is_not_checked(plans):
    # A forward without grad runs no plan.
    model = applied(plans[None]["full"])
    with torch.no_grad():
        step_under(torch.bfloat16)(model)
    # A profile older than the field.
    old = copy.deepcopy(plans[None]["full"])
    del old["model_config"]["autocast_dtype"]
    step_under(torch.bfloat16)(applied(old)).backward()

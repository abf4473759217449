"""The measured check (plan_check.py): auto_checkpoint hands over no plan
measurably slower than a preset that fits. A profile whose times are
edited to call attention nearly free makes the planner recompute it; the
check measures that plan slower and keeps the faster one. A profile that
under-reports memory makes the plan measure over the budget; the check
plans again lower. The model comes out of the check as it went in."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import sacplan_torch
from sacplan_torch import SacplanError, plan_check
from test_model_state import differences, everything
from test_model_state import setup as mid_training_setup

SDPA = "_scaled_dot_product_flash_attention_for_cpu"


class AttnBlock(nn.Module):
    """Attention over a long sequence, then a cheap, wide MLP. The
    attention's inputs come from a frozen projection of the detached
    stream (a fixed token mixer), so its cost is all forward: recomputing
    it adds most of a block's time, a gap a shared machine's noise cannot
    close. The MLP's wide activations make checkpointing every other block
    (every_nth:2) dearer in memory than saving only attention."""

    def __init__(self, dim: int = 64):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim).requires_grad_(False)
        self.scale = nn.Parameter(torch.ones(dim))
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x.detach()).view(b, s, 3, 1, d).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, d)
        h = x + a * self.scale
        return h + self.down(torch.tanh(self.up(h)))


class Net(nn.Module):
    def __init__(self, blocks: int = 4):
        super().__init__()
        self.blocks = nn.ModuleList(AttnBlock() for _ in range(blocks))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def setup(tokens: int = 4096):
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(1, tokens, 64, generator=torch.Generator().manual_seed(1))
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    return model, (lambda m: m(x).square().mean()), optimizer


def captured(tokens: int = 4096):
    model, step, optimizer = setup(tokens)
    profile = sacplan_torch.capture(model, step, blocks="blocks", optimizer=optimizer,
                                    warmup=0, repeats=1)
    return model, step, optimizer, profile


def scaled(profile, *, times=None, bytes_factor=None):
    """A copy of `profile` with each op's times multiplied by times(op id),
    and its outputs' and workspaces' bytes by bytes_factor (but for the
    block's output, the next block's input)."""
    out = copy.deepcopy(profile)
    for block in out["blocks"]:
        for op in block["ops"]:
            if times is not None:
                factor = times(op["id"])
                for key in [k for k in op if k.endswith("_ms")]:
                    op[key] *= factor
            if bytes_factor is not None:
                for output in op.get("outputs", []):
                    if output["id"] != block["output"]:
                        output["bytes"] = int(output["bytes"] * bytes_factor)
                for key in [k for k in op if k.endswith("workspace_bytes")]:
                    op[key] = int(op[key] * bytes_factor)
    return out


def recomputes(plan, op_id: str) -> bool:
    return any(entry.get("checkpoint", True) and op_id not in entry["save"]
               for entry in plan["blocks"])


def check(model, step, optimizer, profile, plan, budget):
    return plan_check.check(model, step, optimizer, list(model.blocks), profile, plan,
                            model_name="Net", budget=budget, semantics="torch-sac",
                            budget_kind="allocated", host_budget=0, steps=2)


def test_a_mis_timed_plan_loses_to_the_faster_preset():
    model, step, optimizer, profile = captured()
    budget = sacplan_torch.plan(profile, preset="attn_only")["predicted"]["peak_bytes"]
    # Attention made nearly free, the cheap ops dear.
    mis_timed = scaled(profile, times=lambda op: 0.01 if op == SDPA else 10.0)
    plan = sacplan_torch.plan(mis_timed, budget=budget)
    assert recomputes(plan, SDPA)

    checked = check(model, step, optimizer, mis_timed, plan, budget)
    print(checked.line)
    measured = checked.measured
    assert plan_check.PLAN in measured and checked.chosen in measured
    assert checked.chosen != plan_check.PLAN
    assert plan_check._decisions_key(checked.plan) != plan_check._decisions_key(plan)
    assert not recomputes(checked.plan, SDPA)
    fastest = measured[checked.chosen].step_ms
    assert all(fastest <= m.step_ms for m in measured.values())
    assert measured[checked.chosen].fits and measured[checked.chosen].peak_bytes <= budget
    assert checked.line.startswith("sacplan: measured step ")
    assert checked.line.endswith(f"kept {checked.chosen}")


def test_auto_checkpoint_measures_by_default_and_not_when_told(monkeypatch):
    model, step, optimizer = setup(tokens=256)
    result = sacplan_torch.auto_checkpoint(model, step, "1GB", blocks="blocks",
                                           optimizer=optimizer, warmup=0, repeats=1)
    assert plan_check.PLAN in result.measured and result.chosen in result.measured
    assert any(note.startswith("sacplan: measured step") for note in result.notes)
    chosen = result.measured[result.chosen]
    assert chosen.fits and chosen.predicted_peak_bytes == result.predicted_peak_bytes
    result.remove()

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured with measure_steps=0")

    monkeypatch.setattr(plan_check._Check, "measure", no_measuring)
    off = sacplan_torch.auto_checkpoint(model, step, "1GB", blocks="blocks",
                                        optimizer=optimizer, warmup=0, repeats=1,
                                        measure_steps=0)
    assert off.measured == {} and off.chosen is None
    assert not any(note.startswith("sacplan: measured") for note in off.notes)
    with pytest.raises(SacplanError, match="measure_steps"):
        sacplan_torch.auto_checkpoint(model, step, "1GB", blocks="blocks",
                                      optimizer=optimizer, measure_steps=-1)


def test_a_plan_measured_over_the_budget_is_planned_again_lower():
    model, step, optimizer, profile = captured(1024)
    budget = sacplan_torch.plan(profile, preset="attn_only")["predicted"]["peak_bytes"]
    # Activations under-reported by 15%: the plan for the budget keeps
    # more than fits. Peaks on CPU are exact, so what fits is the same on
    # every run.
    short = scaled(profile, bytes_factor=0.85)
    plan = sacplan_torch.plan(short, budget=budget)
    checked = check(model, step, optimizer, short, plan, budget)
    measured = checked.measured
    assert not measured[plan_check.PLAN].fits
    assert measured[plan_check.PLAN].peak_bytes > budget
    assert "re-plan 1" in measured and measured["re-plan 1"].fits
    assert (measured["re-plan 1"].predicted_peak_bytes
            < measured[plan_check.PLAN].predicted_peak_bytes)
    assert checked.chosen != plan_check.PLAN
    assert measured[checked.chosen].peak_bytes <= budget


def test_nothing_measured_within_the_budget_is_one_error():
    """Activations under-reported by 70%: every plan the check measures is
    over the budget, and no plan is predicted to fit the budget lowered by
    the overshoot."""
    model, step, optimizer, profile = captured(1024)
    budget = sacplan_torch.plan(profile, preset="attn_only")["predicted"]["peak_bytes"]
    short = scaled(profile, bytes_factor=0.3)
    plan = sacplan_torch.plan(short, budget=budget)
    with pytest.raises(SacplanError, match=f"over the budget of {budget:,} bytes") as error:
        check(model, step, optimizer, short, plan, budget)
    assert "measured peaks: plan " in str(error.value)


def test_the_check_gives_the_model_back():
    """auto_checkpoint with the check on (several plans measured) leaves a
    model mid-training bitwise as it was (test_model_state.py's model:
    dropout, BatchNorm, AdamW state, a parameter outside the model)."""
    model, step, optimizer = mid_training_setup()
    before = everything(model, optimizer)
    result = sacplan_torch.auto_checkpoint(model, step, "1GB", blocks="blocks",
                                           optimizer=optimizer, warmup=0, repeats=1)
    assert result.measured
    assert differences(before, everything(model, optimizer)) == []

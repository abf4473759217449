"""Tensors a block's own code holds past their last reader: a local variable
keeps its tensor alive until the variable is rebound or the block returns,
which the last-reader rule misses (docs/memory_model.md, "Tensors the
block's code holds"). Capture measures when each storage really goes
(code_holds.py) and writes `held_until`; the simulator holds the tensor
that long in the forward and in a checkpoint's re-run.

The block here is written in the test: a wide projection and two copies
of it, read once each, saved by nothing, bound to locals to the block's
end. The measured peaks of none, full and optimal
plans must be within 2% of `sacplan simulate`, and the profile with
`held_until` stripped must miss the none plan's by more, which is what this
test would catch.
"""

from __future__ import annotations

import json

import torch
from torch import nn

import sacplan_torch
from sacplan_cli import plan, simulate

DIM, WIDE, NBLOCKS, TOKENS = 32, 256, 3, 192
TOLERANCE = 0.02


class HoldingBlock(nn.Module):
    """A gate computed without gradients (as from frozen weights) from a
    wide projection: what the gate path makes is large and takes no
    gradient, so the last block's forward, not a backward, is the peak."""

    def __init__(self):
        super().__init__()
        self.up = nn.Linear(DIM, WIDE)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x):
        with torch.no_grad():
            wide = self.up(x)
            shifted = wide + 1.0   # read once each, saved by nothing
            scaled = wide * 2.0
            gate = (shifted.sum(-1, keepdim=True) + scaled.sum(-1, keepdim=True)).sigmoid()
        return x + gate * self.proj(x)  # wide, shifted and scaled die only here


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, DIM)
        self.blocks = nn.ModuleList(HoldingBlock() for _ in range(NBLOCKS))
        self.head = nn.Linear(DIM, 8)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def fresh():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(1, TOKENS, 8, generator=torch.Generator().manual_seed(1)) * 0.1
    return model, lambda m: m(x).square().mean()


def test_held_locals_are_measured_and_predicted(tmp_path):
    model, step = fresh()
    profile_path = str(tmp_path / "profile.json")
    doc = sacplan_torch.capture(model, step, blocks="blocks", path=profile_path,
                                optimizer=torch.optim.AdamW(model.parameters()),
                                warmup=1, repeats=1)
    ops = {op["id"]: op for op in doc["blocks"][1]["ops"]}
    # wide, shifted, scaled and gate are held to the residual add, past
    # their readers; the projection, a temporary of the return expression,
    # goes after its reader.
    for op_id in ("up.addmm", "add", "mul", "sigmoid"):
        assert ops[op_id]["outputs"][0].get("held_until") == "add.2", ops[op_id]
    assert "held_until" not in ops["proj.addmm"]["outputs"][0]

    plans = {name: plan(profile_path, str(tmp_path / f"{name}.json"), preset=name)
             for name in ("none", "full")}
    low = plans["full"]["predicted"]["peak_bytes"]
    high = plans["none"]["predicted"]["peak_bytes"]
    plans["optimal"] = plan(profile_path, str(tmp_path / "optimal.json"),
                            budget=(low + high) // 2)
    measured = {}
    for name, document in plans.items():
        m, s = fresh()
        sacplan_torch.apply_plan(m, document, blocks="blocks")
        measured[name] = sacplan_torch.measure_peak(
            m, s, optimizer=torch.optim.AdamW(m.parameters()), steps=1, timed=False).peak_bytes
        predicted = simulate(profile_path, str(tmp_path / f"{name}.json"))["peak_bytes"]
        assert abs(predicted - measured[name]) <= TOLERANCE * measured[name], \
            (name, predicted, measured[name])

    stripped = json.loads(json.dumps(doc))
    for block in stripped["blocks"]:
        for op in block["ops"]:
            for out in op["outputs"]:
                out.pop("held_until", None)
    stripped_path = str(tmp_path / "stripped.json")
    with open(stripped_path, "w", encoding="utf-8") as f:
        json.dump(stripped, f)
    missed = simulate(stripped_path, str(tmp_path / "none.json"))["peak_bytes"]
    assert missed < (1 - TOLERANCE) * measured["none"], (missed, measured["none"])

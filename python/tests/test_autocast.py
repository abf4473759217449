"""Autocast's weight casts: under torch.autocast with its cache on, every
bf16 cast of an fp32 weight stays in autocast's cache until the outermost
autocast region ends, in checkpointed blocks too (docs/memory_model.md,
"Autocast's weight casts").

The block here is written in the test (dim 128, four Linear layers, 12
blocks, 768 tokens): with AdamW the optimizer step (parameters, two states,
gradients) is the peak unless the forward holds more than half the
parameters' bytes besides them, so the model needs enough tokens and blocks
for the held casts to reach the peak; an optimal plan between none and full
then may peak at the end of the forward, where the casts are. Trained under
torch.autocast("cpu", dtype=torch.bfloat16) with AdamW: the measured peak
of plans none, full and optimal plans at three budgets between them must
be within 2% of `sacplan simulate` (torch-sac); one of them simulated on
the profile with the flag stripped must miss by more than 1%, which is what
this test would catch.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import sacplan_torch
from sacplan_cli import plan, simulate

DIM, HEADS, HIDDEN, NBLOCKS = 128, 4, 512, 12
BATCH, TOKENS = 1, 768
TOLERANCE = 0.02
MISSED_WITHOUT_RULE = 0.01


class WeightHeavyBlock(nn.Module):
    """Pre-norm attention and MLP; four biased Linear layers."""

    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.norm2 = nn.LayerNorm(DIM)
        self.fc1 = nn.Linear(DIM, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = (self.qkv(self.norm1(x)).view(b, s, 3, HEADS, DIM // HEADS)
                   .permute(2, 0, 3, 1, 4))
        attn = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, DIM)
        x = x + self.proj(attn)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        # An embedding, so that the first block's input takes a gradient,
        # as in a real model; the residual stream is kept in fp32 (as Wan
        # keeps it), so the blocks also cast activations to bf16.
        self.embed = nn.Linear(DIM, DIM)
        self.blocks = nn.ModuleList(WeightHeavyBlock() for _ in range(NBLOCKS))
        self.head = nn.Linear(DIM, DIM)

    def forward(self, x):
        x = self.embed(x).float()
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def make(cache_enabled: bool = True):
    torch.manual_seed(0)
    model = Model()
    batch = torch.randn(BATCH, TOKENS, DIM)

    def step(m):
        # The loss is computed inside the region; backward() runs outside.
        with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=cache_enabled):
            return m(batch).float().pow(2).mean()

    return model, step, torch.optim.AdamW(model.parameters(), lr=1e-3)


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("autocast")
    model, step, opt = make()
    profile = sacplan_torch.capture(model, step, blocks="blocks", optimizer=opt,
                                    name="weight-heavy", path=str(tmp / "profile.json"),
                                    warmup=1, repeats=1)
    return tmp, profile


def flagged_ops(profile: dict, block: int = 0) -> list:
    return [op["id"] for op in profile["blocks"][block]["ops"] if op.get("autocast_cached")]


def test_capture_marks_exactly_the_weight_casts(captured):
    _, profile = captured
    for block in profile["blocks"]:
        casts = {op["id"]: op for op in block["ops"] if op["aten"] == "_to_copy"}
        flagged = {i for i, op in casts.items() if op.get("autocast_cached")}
        # Each Linear casts its bias, then its weight (cached), then its
        # fp32 input (an activation: not cached, it dies with its readers;
        # fc2's input, gelu's output, is bf16 already).
        assert flagged == {f"{layer}._to_copy{suffix}"
                           for layer in ("qkv", "proj", "fc1", "fc2")
                           for suffix in ("", ".1")}, sorted(casts)
        assert set(casts) - flagged == {"qkv._to_copy.2", "fc1._to_copy.2"}
        assert all(casts[i]["inputs"] == [] for i in flagged)
        assert all(casts[i]["inputs"] for i in set(casts) - flagged)


def test_capture_marks_nothing_with_the_cache_off(tmp_path):
    model, step, opt = make(cache_enabled=False)
    profile = sacplan_torch.capture(model, step, blocks="blocks", optimizer=opt,
                                    name="weight-heavy", warmup=1, repeats=1)
    assert any(op["aten"] == "_to_copy" for op in profile["blocks"][0]["ops"])
    assert flagged_ops(profile) == []


def test_measured_peak_matches_prediction(captured):
    tmp, profile = captured
    profile_path = str(tmp / "profile.json")
    stripped_path = str(tmp / "profile-without-rule.json")
    stripped = json.loads(json.dumps(profile))
    for block in stripped["blocks"]:
        for op in block["ops"]:
            op.pop("autocast_cached", None)
    with open(stripped_path, "w", encoding="utf-8") as f:
        json.dump(stripped, f)

    plans = {name: plan(profile_path, str(tmp / f"{name}.json"), preset=name)
             for name in ("none", "full")}
    low = plans["full"]["predicted"]["peak_bytes"]
    high = plans["none"]["predicted"]["peak_bytes"]
    # Several budgets: which optimal plan peaks where the casts are live
    # (the end of the forward, the head's forward) depends on the measured
    # times the solver weighs.
    for quarter in (1, 2, 3):
        budget = low + quarter * (high - low) // 4
        label = f"opt{quarter}/4"
        plans[label] = plan(profile_path, str(tmp / f"opt{quarter}.json"), budget=budget)
        assert plans[label]["predicted"]["peak_bytes"] <= budget

    rows = {}
    for label, document in plans.items():
        plan_path = str(tmp / f"{label.replace('/4', '')}.json")
        predicted = simulate(profile_path, plan_path)["peak_bytes"]
        without = simulate(stripped_path, plan_path)["peak_bytes"]
        model, step, opt = make()
        sacplan_torch.apply_plan(model, document, blocks="blocks", model_name="weight-heavy")
        measured = sacplan_torch.measure_peak(model, step, optimizer=opt, steps=1,
                                              timed=False).peak_bytes
        rows[label] = (predicted, without, measured)
    table = "\n".join(
        f"  {label:8s} measured {m:>11,d}  predicted {p:>11,d} {100 * (p - m) / m:+.2f}%"
        f"  rule off {w:>11,d} {100 * (w - m) / m:+.2f}%"
        for label, (p, w, m) in rows.items())
    print(f"\nweight-heavy block, bf16 autocast, AdamW:\n{table}")
    for label, (predicted, _, measured) in rows.items():
        assert abs(predicted - measured) <= TOLERANCE * measured, f"{label}\n{table}"
    # Without the rule a plan misses by several times what the rule leaves
    # (opt1/4, whose peak is the end of the forward: -1.5% against -0.15%
    # since capture also measures what the block's code holds; -2.8% before
    # that), so the test would catch the rule's absence.
    assert any(measured - without > MISSED_WITHOUT_RULE * measured
               for _, without, measured in rows.values()), table

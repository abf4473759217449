"""capture's timed passes take turns, so that a machine whose speed changes
halfway through the capture changes every pass alike: the checkpointed
forward, timed in passes of their own, is not priced at another speed than
the plain forward it is compared with (timed_passes.run_passes)."""

from __future__ import annotations

import importlib

import torch
from torch import nn

import sacplan_torch
from sacplan_torch.clock import cpu_now

# The module, not the function sacplan_torch.capture that shadows its name.
capture_module = importlib.import_module("sacplan_torch.capture")

DIM, TOKENS, REPEATS = 16, 8, 4
SPIN_MS, SLOWDOWN = 15.0, 3.0
# The passes that follow the warm-up, the recorded step and the lifetimes
# step; each advances the progress bar once per training step.
TIMED = ("op times", "step times", "checkpoint times")


class SpinningBlock(nn.Module):
    """A block whose forward burns SPIN_MS * speed[0] of CPU after its
    linear: a stand-in for the machine's speed, which the test changes."""

    def __init__(self, speed: list):
        super().__init__()
        self.linear = nn.Linear(DIM, DIM)
        self.speed = speed

    def forward(self, x):
        h = self.linear(x)
        end = cpu_now() + SPIN_MS * self.speed[0] / 1e3
        while cpu_now() < end:
            pass
        return torch.tanh(h) + x


def capture_slowing_halfway(monkeypatch):
    """Captures two spinning blocks; the machine slows SLOWDOWN-fold once
    half the timed steps have run. Returns the profile and the passes'
    labels in the order the bar saw them."""
    speed = [1.0]
    labels = []
    halfway = 4 * REPEATS // 2

    class SlowingProgress(capture_module.Progress):
        def advance(self, what: str) -> None:
            super().advance(what)
            if what in TIMED:
                labels.append(what)
                if len(labels) == halfway:
                    speed[0] = SLOWDOWN

    torch.manual_seed(0)
    model = nn.Sequential(SpinningBlock(speed), SpinningBlock(speed))
    batch = torch.randn(TOKENS, DIM)
    monkeypatch.setattr(capture_module, "Progress", SlowingProgress)
    profile = sacplan_torch.capture(model, batch, blocks=lambda name, m: isinstance(
        m, SpinningBlock), warmup=1, repeats=REPEATS)
    return profile, labels


def test_passes_take_turns_and_see_the_same_speeds(monkeypatch):
    profile, labels = capture_slowing_halfway(monkeypatch)
    one_round = ["op times", "step times", "checkpoint times", "checkpoint times"]
    assert labels == one_round * REPEATS
    for block in profile["blocks"]:
        plain_ms = sum(op["fwd_ms"] for op in block["ops"])
        checkpointed_ms = sum(op["checkpointed_fwd_ms"] for op in block["ops"])
        # Both see two fast rounds and two slow: their medians agree, and the
        # spin dominates both. Passes run one after another would price the
        # plain forward fast and the checkpointed one slow (about 3x).
        assert 0.8 < checkpointed_ms / plain_ms < 1.4, (checkpointed_ms, plain_ms)
        assert plain_ms > 1.5 * SPIN_MS, plain_ms

"""Predicted step time through the bridge (sacplan simulate, torch-sac, on a
captured profile) against the measured process CPU time of real training
steps under each applied plan: none, full, attn_only, torchtitan and the
optimal plan at two budgets, on the blocks of unseen_blocks.py at two
sizes. The bar: within TOLERANCE (15%), and plans whose predictions differ
by more than that are measured in the same order.

A timing check, so it is a stage of its own (pytest -m fidelity, after the
rest of the suite; docs/python.md, "Step time").

The machine's speed is not steady, so both sides are taken at one speed.
Alone on this 2-core VM, a fixed piece of torch work (reference_ms) ran in
about 5.5 ms or about 9.3 ms, switching every few seconds (of 1,500 runs
in a row, 83% slow), and a training step slowed with it (1.56-1.68x where
the work slowed 1.47-1.55x). Compared raw, a CI run measured every plan of
two small cases 11-31% under its prediction, the work running 1.12-1.15x
slower around the captures than at the steps. So the reference work is
timed after every step of each capture (capture's progress bar advances
between steps, outside every timed span) and before and after every
measured step; a measured step's time is divided by the mean of the two
around it, and a plan's median over its steps, times the work's median
during the captures, is its step at the captures' speed: what the
prediction is judged against.

Each round captures twice, before and after the measured steps, and
predicts with the mean of the two profiles' simulations (the plans come
from the first). The plans take turns in four passes of 2 timed steps
each, after one untimed step (its caches are another plan's). A round that
misses is captured and measured again, at most 3 rounds and at most 4
minutes per case. The reference work's times are printed with every table,
to tell an unsteady machine from a wrong model.
"""

from __future__ import annotations

import importlib
import statistics
import time

import pytest
import torch

import sacplan_torch
import unseen_blocks
from sacplan_cli import check_predictions, plan_path, plans_for, simulate, table_of
from sacplan_torch.clock import cpu_now

pytestmark = pytest.mark.fidelity
# The module, not the function sacplan_torch.capture that shadows its name.
capture_module = importlib.import_module("sacplan_torch.capture")

# Six whole runs of this stage here, alone on the machine, once capture's
# timed passes took turns (timed_passes.run_passes): 3 of 36 cases missed
# 15% in their first round (by 15.0%, 16.8% and 27.2%) and every case was
# within it by its second. Before, with the passes one after another, 5 of
# 30 first rounds missed and one case missed three rounds running.
TOLERANCE = 0.15
CASES = [(kind, size) for kind in ("flux", "moe", "dropout") for size in ("small", "large")]
PASSES, STEPS, ROUNDS, ROUND_BUDGET_S = 4, 2, 3, 240


def reference_ms() -> float:
    """CPU ms of a fixed piece of torch work, small matmuls and elementwise
    ops as in a block's step: how fast the machine runs now."""
    weight, x = torch.full((128, 128), 0.01), torch.ones(128, 128)
    begin = cpu_now()
    for _ in range(40):
        x = torch.tanh(x @ weight) * 0.5 + x * 0.5
    return (cpu_now() - begin) * 1e3


def speed_note(reference: dict) -> str:
    every = reference["capture"] + reference["steps"]
    return (f"reference work {min(every):.2f}-{max(every):.2f} ms, median "
            f"{statistics.median(reference['capture']):.2f} during the captures and "
            f"{statistics.median(reference['steps']):.2f} at the steps")


def measured_steps(setups: dict, reference: list) -> dict:
    """label -> median CPU time of a training step, in units of the
    reference work's time at that moment. The plans take turns, in PASSES
    passes of one untimed step (its caches are another plan's) and STEPS
    timed ones each; the reference work is timed before and after every
    timed step (appended to `reference`) and the step's time divided by the
    mean of the two."""
    trainers = {label: (s, s.make_optimizer(s.model)) for label, s in setups.items()}
    times = {label: [] for label in setups}
    for _ in range(PASSES):
        for label, (s, optimizer) in trainers.items():
            train_step(s, optimizer)
            reference.append(reference_ms())
            for _ in range(STEPS):
                step_ms = train_step(s, optimizer)
                reference.append(reference_ms())
                times[label].append(step_ms / ((reference[-2] + reference[-1]) / 2))
    return {label: statistics.median(values) for label, values in times.items()}


def train_step(s, optimizer) -> float:
    """One training step of setup `s`; its CPU ms."""
    begin = cpu_now()
    loss = s.step(s.model)
    loss.backward()
    optimizer.step()
    s.model.zero_grad(set_to_none=True)
    return (cpu_now() - begin) * 1e3


def timed_capture(kind: str, size: str, path: str, reference: list, monkeypatch) -> None:
    """Captures a fresh model of the case to `path`, the reference work
    timed after each of the capture's steps (appended to `reference`): its
    progress bar advances between steps, outside every timed span."""
    class TimingProgress(capture_module.Progress):
        def advance(self, what: str) -> None:
            super().advance(what)
            reference.append(reference_ms())

    setup = unseen_blocks.setup(kind, size)
    with monkeypatch.context() as patch:
        patch.setattr(capture_module, "Progress", TimingProgress)
        sacplan_torch.capture(setup.model, setup.step, blocks=setup.blocks,
                              optimizer=setup.make_optimizer(setup.model), name=setup.name,
                              path=path, warmup=1, repeats=5)


def one_round(kind: str, size: str, tmp, monkeypatch) -> tuple:
    """(label -> (predicted, measured) step ms, the reference work's times
    during the captures and at the measured steps). Both are taken in
    reference work, then in ms at its median time during the captures: a
    prediction is each capture's simulation over the work's median time
    during that capture, averaged over the two captures; a measurement is
    measured_steps'."""
    reference = {"capture": [], "steps": []}
    before, after = str(tmp / "before.json"), str(tmp / "after.json")
    capture_speed = {before: [], after: []}
    timed_capture(kind, size, before, capture_speed[before], monkeypatch)
    setups = {}
    for label, document in plans_for(before, tmp).items():
        fresh = unseen_blocks.setup(kind, size)
        sacplan_torch.apply_plan(fresh.model, document, blocks=fresh.blocks,
                                 model_name=fresh.name)
        setups[label] = fresh
    measured = measured_steps(setups, reference["steps"])
    timed_capture(kind, size, after, capture_speed[after], monkeypatch)
    reference["capture"] = capture_speed[before] + capture_speed[after]
    ms_per_unit = statistics.median(reference["capture"])
    rows = {}
    for label in setups:
        predicted = statistics.mean(
            simulate(profile, plan_path(tmp, label))["step_ms"] / statistics.median(times)
            for profile, times in capture_speed.items())
        rows[label] = (predicted * ms_per_unit, measured[label] * ms_per_unit)
    return rows, reference


def within(rows: dict, tolerance: float) -> bool:
    return all(abs(p - m) <= tolerance * m for p, m in rows.values())


@pytest.mark.parametrize("kind,size", CASES)
def test_predicted_step_time_matches_measured_cpu_time(kind, size, tmp_path, monkeypatch):
    tolerance = TOLERANCE
    deadline = time.monotonic() + ROUND_BUDGET_S
    for attempt in range(ROUNDS):
        rows, reference = one_round(kind, size, tmp_path, monkeypatch)
        if within(rows, tolerance) or time.monotonic() > deadline:
            break
        print(f"\n{kind} {size}: round {attempt + 1} missed, measuring again; "
              f"{speed_note(reference)}\n{table_of(rows)}")
    check_predictions(f"{kind} {size} step ms; {speed_note(reference)}", rows, tolerance)
    # Full checkpointing must cost measurably more than none, or ranking the
    # plans proves nothing.
    assert rows["full"][1] > 1.3 * rows["none"][1], rows

"""The plan auto_checkpoint hands over, checked by measurement first.

The planner's step time is a model, and a model can miss what sets a
step's pace: where the host side of a step (dispatch, the policy call per
aten op, hooks) is in no op's time, a plan predicted faster than full
checkpointing can run slower at the same peak. So before a plan goes
to the trainer, `check` trains a few steps of the user's own step under
it, under the fastest preset that fits the budget and under any preset the
planner ranks within its stated step-time error of the plan, and keeps the
fastest as measured whose measured peak is within the budget. A plan that
measures over the budget is planned again for a budget lowered by the
overshoot (MAX_REPLANS times at most).

Candidates take turns, one step each per round (a warm-up round, on CPU a
round whose peak the allocator's record meters, then `steps` timed
rounds): on a machine whose speed changes every few seconds, one plan's
steps run in a row could fall in a slow spell of their own. Times are the
wall clock after a device synchronize on CUDA, the process CPU clock on
CPU (clock.py); peaks as measure_peak meters them. The model, the
optimizer and the random generators come out as they went in
(model_state.kept).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import nn

from . import model_state, planner
from .apply import apply_plan
from .clock import cpu_now
from .distributed import from_rank0
from .errors import SacplanError
from .memory import AllocationLog, resident_bytes, sync, train_step
from .step_adapters import as_step

# The bridge's stated step-time error: python/tests/test_step_time.py holds
# a measured step within 15% of its prediction (docs/python.md, "Step
# time"). Presets predicted within it of the plan are near rivals the
# prediction cannot tell from the plan, so they are measured too.
STEP_TIME_ERROR = 0.15

# At most this many plans measured in a round: the plan, the fastest preset
# that fits, and the nearest rival. Each costs 1 warm-up step, on CPU 1
# metered step, and `steps` timed steps.
MAX_MEASURED = 3

# Re-plans for a plan whose measured peak is over the budget.
MAX_REPLANS = 2

PLAN = "plan"  # the planner's plan among the measured; re-plans are "re-plan 1", ...


@dataclasses.dataclass
class MeasuredPlan:
    """One plan as the check measured it (rank 0's figures).

    step_ms: median of the timed steps (wall clock after a synchronize on
      CUDA, process CPU time on CPU). peak_bytes: the most bytes live in a
      metered step, as measure_peak counts them (on CUDA with budget_kind
      "reserved": the caching allocator's reserved peak). The predicted_*
      fields are the plan's own prediction (peak_bytes, or
      reserved_peak_bytes with budget_kind "reserved"). fits: peak_bytes
      within the budget."""

    step_ms: float
    peak_bytes: int
    predicted_step_ms: float
    predicted_peak_bytes: int
    fits: bool


@dataclasses.dataclass
class Checked:
    """check's answer: the plan kept, its name among `measured`, and the
    one line saying what was measured and kept."""

    plan: Dict[str, Any]
    chosen: str
    measured: Dict[str, MeasuredPlan]
    line: str


def _decisions_key(plan: Dict[str, Any]) -> Tuple:
    """What a plan makes the blocks do, to tell two plans apart: a block
    left alone is the same whatever its `save` lists."""
    out = []
    for entry in planner.applied_plan(plan)["blocks"]:
        checkpoint = entry["checkpoint"]
        out.append((entry["index"], checkpoint,
                    frozenset(entry["save"]) if checkpoint else None,
                    frozenset(entry["offload"])))
    return tuple(out)


class _Check:
    def __init__(self, model: nn.Module, step, optimizer, blocks: List[nn.Module],
                 profile: Dict[str, Any], model_name: str, *, budget, semantics: str,
                 budget_kind: str, host_budget, steps: int):
        self.model, self.step, self.optimizer = model, as_step(step), optimizer
        self.blocks, self.profile, self.model_name = blocks, profile, model_name
        self.budget, self.semantics, self.budget_kind = budget, semantics, budget_kind
        self.host_budget, self.steps = host_budget, steps
        self.peak_key = "reserved_peak_bytes" if budget_kind == "reserved" else "peak_bytes"
        self.device = next(model.parameters()).device
        self.plans: Dict[str, Dict[str, Any]] = {}
        self.measured: Dict[str, MeasuredPlan] = {}
        self.budget_bytes = 0

    # -- rank 0: which plans to measure ---------------------------------
    def first_candidates(self, plan: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
        """The plan, the fastest preset that fits the budget (other than
        one that makes the blocks do what the plan does: that is the plan),
        and the presets predicted within STEP_TIME_ERROR of the plan (of
        those the planner's compare measures, planner.compared_preset_names),
        fastest first, MAX_MEASURED plans in all."""
        presets = []
        for name in planner.compared_preset_names():
            try:
                preset = planner.plan(self.profile, preset=name, budget=self.budget,
                                      semantics=self.semantics, budget_kind=self.budget_kind)
            except SacplanError:  # a preset this model cannot take
                continue
            self.budget_bytes = int(preset["budget_bytes"])
            if preset["predicted"][self.peak_key] <= self.budget_bytes:
                presets.append((preset["predicted"]["step_ms"], name, preset))
        presets.sort(key=lambda p: p[0])
        chosen = {PLAN: plan}
        seen = {_decisions_key(plan)}
        limit = plan["predicted"]["step_ms"] * (1 + STEP_TIME_ERROR)
        for step_ms, name, preset in presets:
            if len(chosen) == MAX_MEASURED:
                break
            key = _decisions_key(preset)
            # The fastest preset always; the others when near the plan.
            if key not in seen and (len(chosen) == 1 or step_ms <= limit):
                chosen[name] = preset
                seen.add(key)
        if not self.budget_bytes:  # no preset planned: the plan's own budget
            self.budget_bytes = int(plan["budget_bytes"])
        return chosen

    def replan(self, round_index: int) -> Optional[Dict[str, Dict[str, Any]]]:
        """A plan whose predicted peak is the last plan's less its overshoot
        (what the prediction must say for the step to fit, were its error
        the same), or None when the last plan fits, or no new plan fits
        the lower budget."""
        last = PLAN if round_index == 0 else f"re-plan {round_index}"
        measured = self.measured[last]
        if measured.fits:
            return None
        lower = measured.predicted_peak_bytes - (measured.peak_bytes - self.budget_bytes)
        if lower <= 0:
            return None
        try:
            plan = planner.plan(self.profile, budget=lower, semantics=self.semantics,
                                budget_kind=self.budget_kind, host_budget=self.host_budget)
        except SacplanError:
            return None
        if _decisions_key(plan) in {_decisions_key(p) for p in self.plans.values()}:
            return None  # measured already
        return {f"re-plan {round_index + 1}": plan}

    def record(self, plans: Dict[str, Dict[str, Any]],
               figures: Dict[str, Tuple[float, int]]) -> None:
        for name, plan in plans.items():
            step_ms, peak = figures[name]
            self.plans[name] = plan
            self.measured[name] = MeasuredPlan(
                step_ms=step_ms, peak_bytes=peak,
                predicted_step_ms=float(plan["predicted"]["step_ms"]),
                predicted_peak_bytes=int(plan["predicted"][self.peak_key]),
                fits=peak <= self.budget_bytes)

    def decide(self) -> Tuple[Optional[str], str]:
        """(the fastest measured that fits, the line), or (None, the error)."""
        fits = [name for name, m in self.measured.items() if m.fits]
        if not fits:
            peaks = ", ".join(f"{name} {m.peak_bytes:,}" for name, m in self.measured.items())
            return None, (f"every plan measured over the budget of {self.budget_bytes:,} "
                          f"bytes (measured peaks: {peaks}); plan for a lower budget")
        chosen = min(fits, key=lambda name: self.measured[name].step_ms)
        parts = " / ".join(f"{m.step_ms:.1f} ms ({name}"
                           + ("" if m.fits else f", over the budget at {m.peak_bytes:,} bytes")
                           + ")" for name, m in self.measured.items())
        return chosen, f"sacplan: measured step {parts}; kept {chosen}"

    # -- every rank: the measured steps ---------------------------------
    def measure(self, plans: Dict[str, Dict[str, Any]]) -> Dict[str, Tuple[float, int]]:
        """(median step ms, peak bytes) of each plan, the plans taking turns
        one step each: a warm-up round, on CPU a metered round, then
        `steps` timed rounds (on CUDA the timed steps are metered too)."""
        cuda = self.device.type == "cuda"
        rounds = ["warm-up"] + ([] if cuda else ["peak"]) + ["timed"] * self.steps
        times: Dict[str, List[float]] = {name: [] for name in plans}
        peaks = {name: 0 for name in plans}
        for what in rounds:
            for name, plan in plans.items():
                applied = apply_plan(self.model, plan, blocks=self.blocks,
                                     model_name=self.model_name, profile=self.profile)
                try:
                    if what == "warm-up":
                        train_step(self.model, self.step, self.optimizer)
                    elif what == "peak":
                        resident = resident_bytes(self.model, self.optimizer)
                        with AllocationLog(self.device) as log:
                            train_step(self.model, self.step, self.optimizer)
                        peaks[name] = max(peaks[name], resident + log.peak())
                    else:
                        step_ms, peak = self._timed_step()
                        times[name].append(step_ms)
                        peaks[name] = max(peaks[name], peak)
                finally:
                    applied.remove()
        return {name: (statistics.median(times[name]), peaks[name]) for name in plans}

    def _timed_step(self) -> Tuple[float, int]:
        if self.device.type != "cuda":
            start = cpu_now()
            train_step(self.model, self.step, self.optimizer)
            return (cpu_now() - start) * 1e3, 0
        resident = resident_bytes(self.model, self.optimizer)
        sync(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        before = torch.cuda.memory_allocated(self.device)
        start = time.perf_counter()
        train_step(self.model, self.step, self.optimizer)
        sync(self.device)
        step_ms = (time.perf_counter() - start) * 1e3
        if self.budget_kind == "reserved":
            return step_ms, torch.cuda.max_memory_reserved(self.device)
        return step_ms, resident + torch.cuda.max_memory_allocated(self.device) - before


def check(model: nn.Module, step, optimizer: Optional[torch.optim.Optimizer],
          blocks: List[nn.Module], profile: Dict[str, Any], plan: Optional[Dict[str, Any]],
          *, model_name: str, budget, semantics: str, budget_kind: str, host_budget,
          steps: int) -> Checked:
    """Measures `plan` (rank 0's; None on the other ranks) against the
    fastest preset within `budget` and its near rivals, re-plans when it
    measures over the budget, and returns the fastest as measured that
    fits, the same on every rank (rank 0 decides; every rank runs the same
    steps, as a step may hold collectives). `profile` is this rank's
    profile document. `steps` >= 1 timed steps per plan. Raises
    SacplanError, on every rank, when no measured plan fits the budget."""
    rank = dist.get_rank() if dist.is_initialized() else 0
    state = _Check(model, step, optimizer, blocks, profile, model_name, budget=budget,
                   semantics=semantics, budget_kind=budget_kind, host_budget=host_budget,
                   steps=steps)
    todo = state.first_candidates(plan) if rank == 0 else None
    with model_state.kept(model, optimizer):
        for round_index in range(1 + MAX_REPLANS):
            todo = from_rank0(todo, rank)
            if not todo:
                break
            figures = state.measure(todo)
            if rank == 0:
                state.record(todo, figures)
            last_round = round_index == MAX_REPLANS
            todo = state.replan(round_index) if rank == 0 and not last_round else None
    chosen, line = state.decide() if rank == 0 else (None, "")
    chosen, line, kept_plan, measured = from_rank0(
        (chosen, line, state.plans.get(chosen), state.measured), rank)
    if chosen is None:
        raise SacplanError(line)
    return Checked(plan=kept_plan, chosen=chosen, measured=measured, line=line)

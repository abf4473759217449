"""auto_checkpoint: capture, plan in-process and apply, in one call.

    result = sacplan_torch.auto_checkpoint(model, step, budget="70GB",
                                           blocks="blocks", optimizer=opt)

Under torchrun every rank captures (an FSDP2 or sequence-parallel step needs
every rank to run it), rank 0 plans from its own profile, and the plan is
broadcast, so every rank applies the same one. With `cache_dir`, a later
run of the same model at the same shapes reuses the profile (no capture),
and a plan made for the same budget and semantics.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

import torch
import torch.distributed as dist
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from . import model_state, plan_check, planner
from .apply import AppliedPlan, apply_plan
from .blocks import BlockSpec, find_blocks
from .capture import capture
from .distributed import from_rank0
from .errors import SacplanError
from .json_io import write_json_atomically
from .plan_check import MeasuredPlan
from .plan_doc import model_fingerprint
from .step_adapters import as_step

CACHE_VERSION = 1

# auto_checkpoint plans for its budget less this share of it, so that a
# plan packed up to its budget still measures within it: the bridge's
# predicted peaks can fall short of the measured ones by a fraction of a
# percent (README, "Accuracy").
PEAK_MARGIN = 0.005


@dataclass
class BlockDecision:
    """One block of the plan: checkpointed or not, the op ids whose outputs
    it keeps for backward (`save`), those it re-runs in backward
    (`recompute`), and what it keeps in host memory (`offload`: op ids, and
    carried inputs by argument name; offloaded ops are in `save` too).

    A checkpointed block keeps what its policy saves (the plan's `save`)
    and recomputes the rest. A block left alone (`checkpoint` False) runs
    plainly: it keeps what autograd saves, the ops whose outputs some op's
    backward reads (the profile's `backward_needs`), frees the others after
    their last reader, and recomputes nothing. (Its plan entry lists every
    op under `save`: the planner's way of saying "not checkpointed".)"""

    index: int
    name: str
    checkpoint: bool
    save: List[str]
    recompute: List[str]
    offload: List[str] = field(default_factory=list)


@dataclass
class AutoCheckpoint:
    """What auto_checkpoint did. `remove()` undoes the checkpointing."""

    plan: Dict[str, Any]
    applied: AppliedPlan
    predicted_peak_bytes: int
    predicted_step_ms: float
    decisions: List[BlockDecision]
    captured: bool  # False: the profile came from cache_dir
    profile_path: Optional[str] = None
    cache_key: Optional[str] = None
    notes: List[str] = field(default_factory=list)
    # The plans the measured check timed (plan_check.check), by name, and
    # the one kept: "plan", a preset's name or "re-plan N". Empty and None
    # when the check was off or the plan came from cache_dir.
    measured: Dict[str, MeasuredPlan] = field(default_factory=dict)
    chosen: Optional[str] = None

    def remove(self) -> None:
        self.applied.remove()


class _ShapeTrace(TorchDispatchMode):
    """The aten calls of a forward with their tensors' shapes and dtypes: what
    a cached profile must match."""

    def __init__(self):
        super().__init__()
        self.calls: List[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        shapes = [f"{tuple(a.shape)}:{a.dtype}" for a in args if isinstance(a, torch.Tensor)]
        self.calls.append(f"{func}({','.join(shapes)})")
        return out


def _cache_key(model: nn.Module, step, found, optimizer) -> str:
    """A hash of the model's identity and one forward's aten calls with their
    shapes, run without grad, with the buffers it updates and the random
    state put back (model_state.kept)."""
    trace = _ShapeTrace()
    with model_state.kept(model, forward_only=True), torch.no_grad(), trace:
        as_step(step)(model)
    identity = {
        "version": CACHE_VERSION,
        "model": model_fingerprint(model, found),
        "model_class": type(model).__qualname__,
        "optimizer": type(optimizer).__qualname__ if optimizer is not None else None,
        "world_size": dist.get_world_size() if dist.is_initialized() else 1,
        "calls": trace.calls,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


def _decisions(applied: AppliedPlan, found) -> List[BlockDecision]:
    out = []
    for entry in applied.entries:  # the planner's reading, against the profile
        index = entry["index"]
        checkpoint = entry["checkpoint"]
        save = entry["save"] if checkpoint else entry["autograd_keeps"]
        out.append(BlockDecision(index=index, name=found[index][0], checkpoint=checkpoint,
                                 save=list(save), recompute=list(entry["recompute"]),
                                 offload=list(entry["offload"])))
    return out


def auto_checkpoint(model: nn.Module, step, budget: Union[int, str], *, blocks: BlockSpec,
                    optimizer: Optional[torch.optim.Optimizer] = None,
                    semantics: str = "torch-sac", budget_kind: str = "allocated",
                    cache_dir: Optional[str] = None, name: Optional[str] = None,
                    warmup: int = 1, repeats: int = 3, host_budget: Union[int, str] = 0,
                    host_link: Optional[Dict[str, float]] = None,
                    measure_steps: int = 2) -> AutoCheckpoint:
    """Captures `model` (real training steps: warmup + 2 + 4 * repeats and
    two more, see capture), plans the fastest checkpointing whose simulated
    peak fits `budget` (bytes, or "70GB"), and applies it. The model, the
    optimizer and the random generators come out as they went in, whether
    it returns or raises (capture and the cache key's forward give them back).

    Returns an AutoCheckpoint with the plan, the predicted peak and step and
    each block's decisions. A budget no plan meets raises SacplanError
    naming the smallest feasible peak; so does any other bad input.
    With `host_budget` (bytes, "200GB" or "auto"; 0: none) the plan may also
    offload activations to host memory over the device's link (measured on
    a GPU, or `host_link` as capture takes it). Unlike the planning
    commands, whose default offloads wherever the profile has a host link,
    this call offloads only when asked: its CUDA copies have not yet run on
    a GPU (scripts/gpu-check.sh checks them).

    Before applying, the plan is checked by measurement (plan_check): it,
    the fastest preset that fits the budget and presets predicted within
    the bridge's step-time error of it train in turns, 1 warm-up step, on
    CPU 1 metered step, and `measure_steps` timed steps each (at most 3
    plans, and 2 re-plans for a plan measured over the budget), and the
    fastest as measured within the budget is applied (`measured`, `chosen`
    and a line in `notes` say what was measured). `measure_steps=0` turns
    the check off. A plan read from `cache_dir` is the one kept when it was
    made, and is not measured again. No measured plan within the budget
    raises SacplanError naming the measured peaks and the budget.
    """
    if isinstance(measure_steps, bool) or not isinstance(measure_steps, int) \
            or measure_steps < 0:
        raise SacplanError(f"measure_steps: expected an int >= 0 (0: no measured check), "
                           f"not {measure_steps!r}")
    found = find_blocks(model, blocks)
    rank = dist.get_rank() if dist.is_initialized() else 0
    profile_name = name or type(model).__name__
    key = profile_path = None
    profile = None
    notes = []
    if cache_dir is not None:
        if not isinstance(cache_dir, (str, os.PathLike)) or not os.fspath(cache_dir):
            raise SacplanError("cache_dir: expected a folder name")
        key = _cache_key(model, step, found, optimizer)
        folder = os.path.join(os.fspath(cache_dir), key)
        profile_path = os.path.join(folder, f"profile.rank{rank}.json")
        if os.path.isfile(profile_path):
            profile = profile_path
            notes.append(f"profile from {profile_path}")
    captured = profile is None
    if captured:
        profile = capture(model, step, blocks=found_spec(found), optimizer=optimizer,
                          path=profile_path, name=profile_name, warmup=warmup, repeats=repeats,
                          host_link=host_link)
    plan = from_cache = plan_path = None
    document = _as_document(profile)
    if rank == 0:
        if key is not None:
            budget_tag = hashlib.sha256(
                f"{budget}|{semantics}|{budget_kind}|{host_budget}".encode()).hexdigest()
            plan_path = os.path.join(os.fspath(cache_dir), key, f"plan-{budget_tag[:16]}.json")
        if plan_path is not None and not captured and os.path.isfile(plan_path):
            with open(plan_path, encoding="utf-8") as f:
                plan = json.load(f)
            notes.append(f"plan from {plan_path}, not measured again")
            from_cache = True
        else:
            plan = _plan_with_margin(profile, budget, semantics, budget_kind, host_budget,
                                     notes)
    plan, from_cache = from_rank0((plan, from_cache), rank)
    checked = None
    if measure_steps and not from_cache:
        checked = plan_check.check(model, step, optimizer, found_spec(found),
                                   document, plan, model_name=profile_name,
                                   budget=budget, semantics=semantics, budget_kind=budget_kind,
                                   host_budget=host_budget, steps=measure_steps)
        plan = checked.plan
        notes.append(checked.line)
    if rank == 0 and plan_path is not None and not from_cache:
        write_json_atomically(plan, plan_path)
    applied = apply_plan(model, plan, blocks=found_spec(found), model_name=profile_name,
                         profile=profile)
    applied.profile = document
    predicted = plan.get("predicted", {})
    return AutoCheckpoint(plan=plan, applied=applied,
                          predicted_peak_bytes=int(predicted.get("peak_bytes", 0)),
                          predicted_step_ms=float(predicted.get("step_ms", 0.0)),
                          decisions=_decisions(applied, found),
                          captured=captured,
                          profile_path=profile_path, cache_key=key, notes=notes,
                          measured=checked.measured if checked else {},
                          chosen=checked.chosen if checked else None)


def _plan_with_margin(profile, budget, semantics: str, budget_kind: str, host_budget,
                      notes: List[str]) -> Dict[str, Any]:
    """The fastest plan within `budget` less PEAK_MARGIN of it; when only
    the margin is unmeetable, the fastest within `budget` (and a note)."""
    plan = planner.plan(profile, budget=budget, semantics=semantics,
                        budget_kind=budget_kind, host_budget=host_budget)
    budget_bytes = int(plan.get("budget_bytes", 0))
    room = budget_bytes - int(budget_bytes * PEAK_MARGIN)
    key = "reserved_peak_bytes" if budget_kind == "reserved" else "peak_bytes"
    if plan["predicted"][key] <= room:
        return plan
    try:
        return planner.plan(profile, budget=room, semantics=semantics,
                            budget_kind=budget_kind, host_budget=host_budget)
    except SacplanError:
        notes.append(f"no plan fits {room:,} bytes ({PEAK_MARGIN:.1%} below the budget, "
                     "the bridge's peak error): planned for the budget itself")
        return plan


def _as_document(profile) -> Dict[str, Any]:
    if isinstance(profile, dict):
        return profile
    with open(profile, encoding="utf-8") as f:
        return json.load(f)


def found_spec(found) -> List[nn.Module]:
    """find_blocks' result as a block spec (the modules themselves)."""
    return [module for _, module in found]

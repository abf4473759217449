"""Reading plan.json (`sacplan.plan/1`, `/2`) and checking it against a model."""

from __future__ import annotations

import inspect
import json
import os
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from .blocks import eager_block
from .errors import SacplanError, one_line
from .naming import autocast_dtype_of

PROFILE_SCHEMA = "sacplan.profile/1"

PlanLike = Union[str, os.PathLike, Mapping[str, Any]]


def _read_accepted(source: PlanLike) -> Dict[str, Any]:
    """A plan the C++ reader accepted, as a dict. The file is read again, so
    only a file changed in between can fail here."""
    if isinstance(source, Mapping):
        return dict(source)
    try:
        with open(source, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise SacplanError(f"plan {source}: changed while being read ({exc})") from exc


def load_plan(source: PlanLike, *, profile=None, model_name: Optional[str] = None,
              model_config: Optional[Dict[str, Any]] = None
              ) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Reads a plan with sacplan's own reader (the command line's, through
    the planner extension), so that both refuse the same plans with the
    same message, and returns (the plan as written, what sacplan derives
    from it: planner.applied_plan's `semantics` and `blocks`, by index).
    With `profile`, it is checked as `sacplan simulate` checks it; with
    `model_config` (model_fingerprint's), against that live model. Raises
    SacplanError."""
    if not isinstance(source, (Mapping, str, os.PathLike)):
        raise SacplanError(
            f"plan: expected a file path or a dict, not {type(source).__name__}")
    from .planner import applied_plan

    doc = dict(source) if isinstance(source, Mapping) else source
    reading = applied_plan(doc, profile, model_name, model_config)
    return _read_accepted(source), reading


def block_type_name(module: nn.Module) -> str:
    """The class name of a block as its author wrote it. FSDP2's
    `fully_shard` (and `replicate`) swap a module's class for a subclass
    `FSDP<Class>` with bases (FSDPModule, Class); a plan captured before
    sharding must still match a block sharded before apply_plan, and one
    captured eagerly a block wrapped by torch.compile."""
    cls = type(eager_block(module))
    while len(cls.__bases__) == 2:
        wrapper, original = cls.__bases__
        if wrapper.__name__ not in ("FSDPModule", "ReplicateModule"):
            break
        if cls.__name__ != wrapper.__name__[:-len("Module")] + original.__name__:
            break
        cls = original
    return cls.__name__


def model_fingerprint(model: nn.Module, blocks: Sequence[Tuple[str, nn.Module]]) -> Dict[str, Any]:
    """What capture records in model_config of a model's identity, known
    before it runs: read off the model here, compared with a plan's by the
    planner (planner.applied_plan), as it compares a plan with a profile."""
    first = blocks[0][1]
    return {
        "framework": "pytorch",
        "blocks": len(blocks),
        "block_type": block_type_name(first),
        "block_param_count": sum(p.numel() for p in first.parameters()),
        "param_count": sum(p.numel() for p in model.parameters()),
    }


def autocast_fingerprint(traces) -> Dict[str, Any]:
    """What model_config records of the autocast the blocks ran under in the
    recorded step: `autocast_dtype`, the dtype autocast cast to on the
    blocks' device, or None when it was off. The weight casts autocast
    caches, the activations' dtypes and so the whole op graph depend on it.
    Blocks that ran under different autocasts record nothing (unchecked)."""
    dtypes = {trace.autocast_dtype for trace in traces}
    return {"autocast_dtype": dtypes.pop()} if len(dtypes) == 1 else {}


def _autocast_name(dtype: str | None) -> str:
    return f"autocast {dtype}" if dtype is not None else "no autocast"


def check_autocast_matches(plan: Dict[str, Any], index: int, name: str, args,
                           kwargs) -> None:
    """Raises SacplanError when a block runs under another autocast than the
    plan's profile was captured under (model_config.autocast_dtype; a
    profile older than the field is not checked). The block's device is
    that of its first tensor argument, as capture read it."""
    recorded = plan.get("model_config", {})
    if "autocast_dtype" not in recorded:
        return
    first = next((v for v in list(args) + list(kwargs.values())
                  if isinstance(v, torch.Tensor)), None)
    actual = autocast_dtype_of(first.device.type if first is not None else "cpu")
    if actual != recorded["autocast_dtype"]:
        raise SacplanError(
            f"plan is for another autocast dtype: its profile was captured under "
            f"{_autocast_name(recorded['autocast_dtype'])}, blocks[{index}] ({one_line(name)}) "
            f"runs under {_autocast_name(actual)} here; capture the step as it trains, "
            "autocast included, and plan again")


def check_input_matches(plan: Dict[str, Any], forward, args, kwargs) -> None:
    """Raises SacplanError when a block's streams have another shape or
    dtype than the ones the plan's profile was captured with: the first
    tensor argument for a single-stream profile (carried_shape,
    carried_dtype), each stream's argument by name for several (streams)."""
    recorded = plan.get("model_config", {})
    if "streams" in recorded:
        try:
            bound = inspect.signature(forward).bind(*args, **kwargs).arguments
        except TypeError:
            bound = {}
        for stream in recorded["streams"]:
            value = bound.get(stream["arg"])
            if isinstance(value, torch.Tensor):
                _check_tensor(stream["shape"], stream["dtype"], value, f" ('{stream['arg']}')")
        return
    first = next((v for v in list(args) + list(kwargs.values())
                  if isinstance(v, torch.Tensor)), None)
    if first is not None:
        _check_tensor(recorded.get("carried_shape"), recorded.get("carried_dtype"), first, "")


def _check_tensor(shape, dtype, value, which: str) -> None:
    actual_dtype = str(value.dtype).replace("torch.", "")
    if shape is not None and list(shape) != list(value.shape):
        raise SacplanError(
            f"plan is for another shape: blocks take {shape}{which} "
            f"in its profile, {list(value.shape)} here")
    if dtype is not None and dtype != actual_dtype:
        raise SacplanError(
            f"plan is for another dtype: blocks take {dtype}{which} "
            f"in its profile, {actual_dtype} here")

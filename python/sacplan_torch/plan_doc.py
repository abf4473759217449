"""Reading plan.json (`sacplan.plan/1`, `/2`) and checking it against a model."""

from __future__ import annotations

import inspect
import json
import os
from typing import Any, Dict, Mapping, Sequence, Tuple, Union

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


def load_plan(source: PlanLike) -> Dict[str, Any]:
    """Reads a plan with sacplan's own reader (the command line's, through
    the planner extension), so that both refuse the same plans with the
    same message, then checks the fields only apply_plan reads. Raises
    SacplanError."""
    if not isinstance(source, (Mapping, str, os.PathLike)):
        raise SacplanError(
            f"plan: expected a file path or a dict, not {type(source).__name__}")
    from .planner import read_plan

    read_plan(dict(source) if isinstance(source, Mapping) else source)
    plan = _read_accepted(source)
    blocks = plan["blocks"]
    if not blocks:
        raise SacplanError("plan: blocks must be a non-empty list")
    # Blocks may come in any order, as sacplan's C++ reader takes them; each
    # index once.
    seen = set()
    for i, block in enumerate(blocks):
        index = block.get("index") if isinstance(block, dict) else None
        if isinstance(index, bool) or not isinstance(index, int):
            raise SacplanError(f"plan: blocks[{i}].index must be an integer")
        if not 0 <= index < len(blocks) or index in seen:
            raise SacplanError(f"plan: block index {index} is out of range or repeated "
                               f"(the plan has {len(blocks)} blocks)")
        seen.add(index)
    plan["blocks"] = blocks = sorted(blocks, key=lambda block: block["index"])
    for i, block in enumerate(blocks):
        save = block.get("save")
        if not isinstance(save, list) or not all(isinstance(s, str) for s in save):
            raise SacplanError(f"plan: blocks[{i}].save must be a list of op ids")
        recompute = block.get("recompute", [])
        if not isinstance(recompute, list) or not all(isinstance(s, str) for s in recompute):
            raise SacplanError(f"plan: blocks[{i}].recompute must be a list of op ids")
        if not isinstance(block.get("checkpoint", True), bool):
            raise SacplanError(f"plan: blocks[{i}].checkpoint must be true or false")
        offload = block.get("offload", [])
        if not isinstance(offload, list) or not all(isinstance(s, str) for s in offload):
            raise SacplanError(f"plan: blocks[{i}].offload must be a list of ids")
    config = plan.get("model_config", {})
    if not isinstance(config, dict):
        raise SacplanError("plan: model_config must be an object")
    return plan


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
    """What capture records in model_config and apply_plan compares: the
    parts of a model's identity that are known before it runs."""
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


def check_plan_matches(plan: Dict[str, Any], model: nn.Module,
                       blocks: Sequence[Tuple[str, nn.Module]],
                       model_name: str | None) -> None:
    """Raises SacplanError when the plan was made for another model."""
    if model_name is not None and plan.get("model") not in (None, model_name):
        raise SacplanError(
            f"plan is for model '{plan.get('model')}', not '{model_name}'")
    recorded = plan.get("model_config", {})
    if recorded and recorded.get("framework") != "pytorch":
        # sacplan's built-in models (wan-tiny, ...) have no framework field.
        raise SacplanError(
            f"plan is for another model: '{plan.get('model')}' was not captured from "
            "PyTorch (model_config.framework is not 'pytorch'); capture this model and "
            "plan its profile")
    if len(plan["blocks"]) != len(blocks):
        raise SacplanError(
            f"plan has {len(plan['blocks'])} blocks, the model has {len(blocks)}")
    actual = model_fingerprint(model, blocks)
    for key in ("block_type", "block_param_count", "param_count"):
        if key in recorded and recorded[key] != actual[key]:
            raise SacplanError(
                f"plan is for another model: model_config.{key} is "
                f"{recorded[key]!r}, this model has {actual[key]!r}")


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

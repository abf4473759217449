"""What a training setup hands to capture, check and the examples."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
from typing import Callable, Optional

import torch
from torch import nn

from .blocks import BlockSpec
from .errors import SacplanError


@dataclasses.dataclass
class Setup:
    """One model, ready to train a step.

    model: the nn.Module, parameters on the device they train on.
    step: runs the forward of one training step (under autocast if the
      trainer uses it) on a fixed batch and returns the scalar loss; it does
      not call backward or the optimizer.
    blocks: which submodules are the blocks (see sacplan_torch.find_blocks).
    make_optimizer: builds the optimizer over model.parameters(), or None
      to train without one.
    name: the model's name in profile.json and plan.json.
    """

    model: nn.Module
    step: Callable[[nn.Module], torch.Tensor]
    blocks: BlockSpec
    make_optimizer: Optional[Callable[[nn.Module], torch.optim.Optimizer]]
    name: str


def load_setup(spec: str, **kwargs) -> Setup:
    """`path/to/file.py:function` or `package.module:function` -> function(**kwargs)."""
    target, sep, function = spec.rpartition(":")
    if not sep or not target or not function:
        raise SacplanError(f"setup '{spec}': expected FILE.py:FUNCTION or MODULE:FUNCTION")
    try:
        if target.endswith(".py"):
            module_spec = importlib.util.spec_from_file_location("sacplan_user_setup", target)
            if module_spec is None or module_spec.loader is None:
                raise SacplanError(f"setup '{spec}': cannot load {target}")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules["sacplan_user_setup"] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except (OSError, ImportError) as exc:
        raise SacplanError(f"setup '{spec}': {exc}") from exc
    factory = getattr(module, function, None)
    if not callable(factory):
        raise SacplanError(f"setup '{spec}': {target} has no function '{function}'")
    setup = factory(**kwargs)
    if not isinstance(setup, Setup):
        raise SacplanError(f"setup '{spec}': {function}() must return sacplan_torch.Setup")
    return setup


_DTYPE_NAMES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16,
                "float16": torch.float16, "fp32": torch.float32, "float32": torch.float32}


def as_dtype(dtype) -> torch.dtype:
    """A torch.dtype, or its name as `python -m sacplan_torch capture --arg
    dtype=fp32` passes it to a setup: bf16/bfloat16, fp16/float16,
    fp32/float32. Raises ValueError for anything else."""
    if isinstance(dtype, torch.dtype):
        return dtype
    key = str(dtype).replace("torch.", "")
    if key not in _DTYPE_NAMES:
        raise ValueError(f"dtype must be a torch.dtype or one of {sorted(_DTYPE_NAMES)}, "
                         f"not {dtype!r}")
    return _DTYPE_NAMES[key]

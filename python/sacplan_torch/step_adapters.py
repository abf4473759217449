"""What capture accepts as a step: a function model -> loss, or an example
batch whose output becomes a stand-in loss."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .errors import SacplanError
from .storage import tensors_of


def as_step(step) -> Callable[[nn.Module], torch.Tensor]:
    if callable(step):
        return step
    if isinstance(step, dict):
        return lambda model: as_loss(model(**step))
    if isinstance(step, (tuple, list)):
        return lambda model: as_loss(model(*step))
    if isinstance(step, torch.Tensor):
        return lambda model: as_loss(model(step))
    raise SacplanError("step must be a function model -> loss, or an example batch "
                       "(a tensor, a tuple of arguments or a dict of keyword arguments)")


def as_loss(out) -> torch.Tensor:
    """An example batch's loss: the output itself when it is a scalar, else
    the mean square of the first output tensor (a stand-in objective whose
    backward touches every output element, as a real loss does)."""
    tensors = tensors_of(out)
    if not tensors:
        raise SacplanError("the model returned no tensor")
    first = tensors[0]
    return first if first.dim() == 0 else first.float().square().mean()


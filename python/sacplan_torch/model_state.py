"""What a planning call gives back: the model, its optimizer and the random
generators as they were before it trained.

capture trains real steps with the user's optimizer, and auto_checkpoint's
cache key runs a forward, which updates buffers (BatchNorm's running
statistics) and draws random numbers (dropout, the step's own noise). A
model going into a planning call must come out as it went in, or a
fine-tune loses its starting point and a resumed run its optimizer state
without a word. `kept` puts all of it back.

How: every tensor is copied to host memory (this rank's shard of a
DTensor: FSDP2's parameters, gradients and optimizer state) and copied
back into the same tensor object, so the Parameter objects that the
optimizer, FSDP2 and the caller hold stay the ones they hold. Host memory
rather than the device, because a second copy of a large model's weights
and optimizer state does not fit beside them on the device it trains on;
it costs one transfer of that size each way. A deep copy of the model and
optimizer would take the same memory on the device, and would give back
other objects than those the optimizer, FSDP2's hooks and the caller refer
to.
"""

from __future__ import annotations

import contextlib
import copy
import random
import sys
from typing import Any, Dict, Iterator, Optional, Tuple

import torch
from torch import nn

from .distributed import local


class _HostCopies:
    """A host copy of each tensor added (once however often it is added),
    copied back into that same tensor by restore()."""

    def __init__(self):
        self._saved: Dict[int, Tuple[torch.Tensor, torch.Tensor]] = {}

    def add(self, t: torch.Tensor) -> torch.Tensor:
        if id(t) not in self._saved:
            self._saved[id(t)] = (t, local(t).detach().to("cpu", copy=True))
        return t

    def restore(self) -> None:
        with torch.no_grad():
            for t, saved in self._saved.values():
                local(t).copy_(saved)


class _Generators:
    """The global random generators a step can draw from."""

    def __init__(self):
        self.cpu = torch.get_rng_state()
        # Reading a CUDA generator initializes CUDA; a process that has not
        # initialized it has drawn nothing there.
        self.cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
        self.python = random.getstate()
        # NumPy's global generator is seeded from the OS when NumPy is
        # imported: one imported later has no earlier state to keep.
        self.numpy = sys.modules.get("numpy")
        self.numpy_state = self.numpy.random.get_state() if self.numpy is not None else None

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)
        random.setstate(self.python)
        if self.numpy is not None:
            self.numpy.random.set_state(self.numpy_state)


class _State:
    """What kept() gives back, taken on entry."""

    def __init__(self, model: nn.Module, optimizer: Optional[torch.optim.Optimizer],
                 forward_only: bool):
        self.copies = _HostCopies()
        self.generators = _Generators()
        # A forward may rebind a buffer (`self.stat = self.stat * m + ...`)
        # as well as write it in place: both the tensor and its values go back.
        self.buffers = [(module._buffers, name, t if t is None else self.copies.add(t))
                        for module in model.modules() for name, t in module._buffers.items()]
        self.grads = []
        self.optimizer = None if forward_only else optimizer
        if forward_only:
            return
        # The optimizer may also step parameters outside the model (a
        # learned loss weight the step function uses).
        params = {id(p): p for p in model.parameters()}
        for group in optimizer.param_groups if optimizer is not None else []:
            params.update((id(p), p) for p in group["params"])
        for p in params.values():
            # Training changes only what it gives gradients to: a frozen
            # parameter (a LoRA fine-tune's base weights) is not copied.
            if p.requires_grad:
                self.copies.add(p)
            self.grads.append((p, p.grad if p.grad is None else self.copies.add(p.grad)))
        if optimizer is not None:
            self.state = {key: (inner, self._record(inner))
                          for key, inner in optimizer.state.items()}
            self.groups = [{k: v if k == "params" else self._record(v) for k, v in g.items()}
                           for g in optimizer.param_groups]

    def _record(self, value: Any) -> Any:
        """`value` with its tensors' values copied to the host: tensors as
        they are (the same objects), lists, tuples and dicts rebuilt around
        them, anything else a deep copy."""
        if isinstance(value, torch.Tensor):
            return self.copies.add(value)
        if type(value) in (list, tuple):
            return type(value)(self._record(v) for v in value)
        if type(value) is dict:
            return {k: self._record(v) for k, v in value.items()}
        return copy.deepcopy(value)

    def restore(self) -> None:
        for held, name, t in self.buffers:
            held[name] = t
        for p, grad in self.grads:
            p.grad = grad
        if self.optimizer is not None:
            state = self.optimizer.state
            state.clear()
            for key, (inner, record) in self.state.items():
                inner.clear()
                inner.update(record)
                state[key] = inner
            for group, record in zip(self.optimizer.param_groups, self.groups):
                group.clear()
                group.update(record)
        self.copies.restore()
        self.generators.restore()


@contextlib.contextmanager
def kept(model: nn.Module, optimizer: Optional[torch.optim.Optimizer] = None, *,
         forward_only: bool = False) -> Iterator[None]:
    """Gives back, when the block ends (returning or raising), what the code
    in it changed of:
    - the random generators: torch's CPU generator, every CUDA device's
      when CUDA was initialized on entry, Python's `random`, and NumPy's
      global generator when NumPy was imported on entry;
    - every buffer of the model (BatchNorm's running statistics): the
      tensor each module holds under each name, with its values;
    and unless `forward_only` (for a forward without grad, which trains
    nothing):
    - the values of the parameters that require grad, the model's and the
      optimizer's, in place (the same Parameter objects; under FSDP2 this
      rank's shard). Frozen parameters are not copied: training does not
      change them;
    - each of those parameters' `.grad`: None, or the same tensor with its
      values;
    - the optimizer's `state` (the same dict for each parameter, holding
      the same tensor objects with their values and the other entries as
      they were; parameters and entries it gained inside are dropped) and
      each of its `param_groups` entries (`params` stays the same list).

    Memory, while the block runs: one host (pageable) copy of each tensor
    above, none on the device. Non-tensor entries are kept as deep copies.
    Generators a caller made itself (`torch.Generator`,
    `numpy.random.default_rng`) are the caller's, not kept."""
    state = _State(model, optimizer, forward_only)
    try:
        yield
    finally:
        state.restore()

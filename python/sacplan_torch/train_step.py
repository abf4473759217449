"""capture's training step: the model, its blocks, the step function and
the optimizer, what stays resident, and one step timed by phase."""

from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import nn

from .clock import Clocks, cpu_now
from .memory import check_loss, sync
from .storage import storage_key


class TrainStep:
    """What every pass needs: the model, its blocks, the step and the
    optimizer, what stays resident (parameters, buffers), and the clocks
    (`clocks`; `clock` is the device's)."""

    def __init__(self, model: nn.Module, found: List[Tuple[str, nn.Module]],
                 step_fn: Callable[[nn.Module], torch.Tensor],
                 optimizer: Optional[torch.optim.Optimizer]):
        self.model, self.found, self.optimizer = model, found, optimizer
        self.step_fn = step_fn
        params = list(model.parameters())
        self.params = params
        self.device = params[0].device
        self.clocks = Clocks.for_device(self.device)
        self.clock = self.clocks.device
        self.resident = {storage_key(t) for t in params + list(model.buffers())} - {None}

    def tick(self) -> float:
        """Seconds on the clock phases are timed with, after the device has
        finished its queued work: process CPU time on CPU, wall on GPU."""
        sync(self.device)
        return time.perf_counter() if self.device.type == "cuda" else cpu_now()

    def host_now(self) -> float:
        """The host clock's seconds (0 without one)."""
        return self.clocks.host.now() if self.clocks.host is not None else 0.0

    def _boundary(self) -> Tuple[float, float, float]:
        """Between two phases: (the host clock before the synchronize,
        tick's reading, the host clock after it)."""
        issued = self.host_now()
        device = self.tick()
        return issued, device, self.host_now()

    def timed_step(self) -> Dict[str, float]:
        """Trains one step; returns the ms of its forward, backward and
        optimizer phases on tick's clock and, with a host clock, as
        `host_forward`, `host_backward`, `host_optimizer`, the host's time
        issuing each: from the synchronize before the phase to its last
        call's return, before the synchronize after it."""
        bounds = [self._boundary()]
        loss = self.loss()
        bounds.append(self._boundary())
        loss.backward()
        bounds.append(self._boundary())
        del loss
        if self.optimizer is not None:
            self.optimizer.step()
        bounds.append(self._boundary())
        self.model.zero_grad(set_to_none=True)
        phases = {}
        for name, begin, end in zip(("forward", "backward", "optimizer"), bounds, bounds[1:]):
            phases[name] = (end[1] - begin[1]) * 1e3
            if self.clocks.host is not None:
                phases["host_" + name] = (end[0] - begin[2]) * 1e3
        return phases

    def loss(self) -> torch.Tensor:
        return check_loss(self.step_fn(self.model))

    def finish(self, loss: torch.Tensor) -> None:
        loss.backward()
        if self.optimizer is not None:
            self.optimizer.step()
        self.model.zero_grad(set_to_none=True)

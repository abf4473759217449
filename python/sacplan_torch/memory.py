"""Exact allocation accounting for one training step, on CPU and CUDA.

On CPU the only complete record of allocations is PyTorch's profiler with
`profile_memory=True`: it reports every allocation and free of the CPU
allocator (and of the CUDA caching allocator) with its size and address,
in order. AllocationLog turns that record into live bytes over time, and
lets code mark moments in it with sentinel allocations of odd sizes that no
tensor of a model would have, so the marks land exactly between two real
events.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import sys
import tempfile
import time
import warnings
from typing import Callable, Dict, Iterable, List, Optional

import torch
from torch import nn
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile

from . import distributed
from .clock import cpu_now
from .errors import SacplanError

# Sentinel sizes: large primes plus a mark index, far from any tensor size a
# model allocates (those are multiples of an element size times a shape).
# Sentinels live in host memory whatever the device: CUDA's caching
# allocator reports block sizes rounded to 512 bytes, which would merge
# neighbouring marks; host and device allocations share the profiler's
# clock, so a host sentinel still places its mark among device allocations.
_SENTINEL_BASE = 999_983


# What torch's profiler says on every machine, about itself, that a user of
# capture cannot act on: kineto's line (C++, to fd 2, once a process) when
# its CUDA build finds no GPU, and the warning that a profile keeps one
# cycle's events, which is all AllocationLog reads.
_KINETO_NO_GPU = b"gpuGetDeviceCount failed"
_ONE_CYCLE_WARNING = "Warning: Profiler clears events at the end of each cycle"


@contextlib.contextmanager
def _profiler_quiet(device_type: str):
    """Silences the two messages above around the profiler's own calls, and
    nothing else: other lines written to fd 2 meanwhile are written back.
    fd 2 is swapped only on a CPU, where kineto's line comes from (entering
    or leaving the first profile of the process); KINETO_LOG_LEVEL would
    silence it too, but kineto reads it once, at its first use, and would
    keep its errors from the user's own profiles for good."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_ONE_CYCLE_WARNING, category=UserWarning)
        if device_type != "cpu":
            yield
            return
        sys.stderr.flush()
        try:
            saved_fd = os.dup(2)
        except OSError:  # no fd 2 to write to, nothing to silence
            yield
            return
        try:
            with tempfile.TemporaryFile() as caught:
                os.dup2(caught.fileno(), 2)
                try:
                    yield
                finally:
                    os.dup2(saved_fd, 2)
                    caught.seek(0)
                    kept = b"".join(line for line in caught.read().splitlines(keepends=True)
                                    if _KINETO_NO_GPU not in line)
                    while kept:
                        kept = kept[os.write(2, kept):]
        finally:
            os.close(saved_fd)


def unique_storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    seen = set()
    total = 0
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            continue
        t = distributed.local(t)  # a rank holds its shard of a DTensor
        storage = t.untyped_storage()
        key = (t.device, storage.data_ptr())
        if key in seen or storage.data_ptr() == 0:
            continue
        seen.add(key)
        total += storage.nbytes()
    return total


def optimizer_state_tensors(optimizer: Optional[torch.optim.Optimizer]) -> List[torch.Tensor]:
    if optimizer is None:
        return []
    found = []
    for state in optimizer.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                found.append(value)
    return found


def resident_bytes(model: nn.Module, optimizer: Optional[torch.optim.Optimizer]) -> int:
    """Bytes a model holds between steps: parameters, buffers, gradients that
    are set, and the optimizer's state."""
    tensors = list(model.parameters()) + list(model.buffers())
    tensors += [p.grad for p in model.parameters() if p.grad is not None]
    tensors += optimizer_state_tensors(optimizer)
    return unique_storage_bytes(tensors)


def _allocation_events(prof: profile) -> List[tuple]:
    """(time ns, bytes: negative for a free, address, device type) of every
    allocation and free the profile recorded, in time order."""
    found = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        if node.tag == _EventType.Allocation:
            fields = node.extra_fields
            found.append((node.start_time_ns, fields.alloc_size, fields.ptr,
                          fields.device.type))
        stack.extend(node.children)
    found.sort(key=lambda event: event[0])
    return found


class AllocationLog:
    """Records every allocation on `device` while active; `mark(label)`
    notes a moment. After exit: live(label) is the bytes allocated since the
    log started and still live at that mark; peak(a, b) the most live between
    two marks (None: the start or the end).

    Inside a torch.distributed process group, collectives complete before
    they return while the log records (distributed.CollectiveSync): gloo
    frees on its worker threads, which the record would miss. FSDP2's
    all-gathers and reduce-scatters are marked (`collectives.fsdp_marks`)."""

    def __init__(self, device: torch.device):
        self.device = torch.device(device)
        self._labels: List[str] = []
        self._deltas: List[int] = []
        self._mark_pos: Dict[str, int] = {}
        self._prefix: List[int] = []

    def __enter__(self) -> "AllocationLog":
        activities = [ProfilerActivity.CPU]
        if self.device.type == "cuda":
            activities.append(ProfilerActivity.CUDA)
        self.collectives = (distributed.CollectiveSync(settle=True, mark=self.mark)
                            if distributed.active() else None)
        if self.collectives is not None:
            self.collectives.__enter__()
        self._profiler = profile(activities=activities, profile_memory=True)
        with _profiler_quiet(self.device.type):
            self._profiler.__enter__()
        return self

    def last_mark(self, prefix: str) -> Optional[str]:
        """The latest mark whose label starts with `prefix`, or None."""
        return next((label for label in reversed(self._labels) if label.startswith(prefix)),
                    None)

    def mark(self, label: str) -> None:
        if label in self._labels:
            raise SacplanError(f"internal: mark '{label}' set twice")
        size = _SENTINEL_BASE + 16 * len(self._labels)
        self._labels.append(label)
        sentinel = torch.empty(size, dtype=torch.uint8)
        del sentinel

    def __exit__(self, *exc) -> None:
        with _profiler_quiet(self.device.type):
            self._profiler.__exit__(*exc)
        if self.collectives is not None:
            self.collectives.__exit__(*exc)
        if exc[0] is not None:
            return
        sentinel_label = {_SENTINEL_BASE + 16 * i: label for i, label in enumerate(self._labels)}
        # Address -> size of what this log saw allocated and not yet freed. A
        # free counts only when its block is here: the profiler also reports
        # the free of a block allocated while an earlier profile of the
        # process ran (its size table outlives the profile), which would
        # take bytes off a measured peak depending on what the process had
        # profiled before.
        live: Dict[tuple, int] = {}
        sentinels = set()
        for _, nbytes, ptr, device in _allocation_events(self._profiler):
            key = (device, ptr)
            if nbytes > 0:
                if (device == "cpu" and nbytes in sentinel_label
                        and sentinel_label[nbytes] not in self._mark_pos):
                    self._mark_pos[sentinel_label[nbytes]] = len(self._deltas)
                    sentinels.add(key)
                    continue
                live[key] = nbytes
            elif key in sentinels:
                sentinels.discard(key)
                continue
            elif live.pop(key, None) is None:
                continue
            if device == self.device.type:
                self._deltas.append(nbytes)
        missing = [label for label in self._labels if label not in self._mark_pos]
        if missing:
            raise SacplanError(f"the profiler recorded no allocation for mark(s) {missing}")
        running = 0
        self._prefix = [0]
        for d in self._deltas:
            running += d
            self._prefix.append(running)

    def _pos(self, label: Optional[str], default: int) -> int:
        return default if label is None else self._mark_pos[label]

    def has(self, label: str) -> bool:
        return label in self._mark_pos

    def live(self, label: str) -> int:
        return self._prefix[self._mark_pos[label]]

    def peak(self, start: Optional[str] = None, end: Optional[str] = None) -> int:
        a = self._pos(start, 0)
        b = self._pos(end, len(self._prefix) - 1)
        return max(self._prefix[a:b + 1])


@dataclasses.dataclass
class Measurement:
    """A measured training step.

    peak_bytes: the most bytes live at once during a step (largest over the
      measured steps): what the model holds between steps (parameters,
      buffers, optimizer state) plus the step's own allocations, not counting
      the batch the caller built before the step. This is what sacplan
      simulate's peak_bytes predicts.
    step_ms: median time of a step (forward, backward, optimizer) on the
      clock capture times ops with: process CPU time on CPU, wall time on
      GPU. This is what sacplan simulate's step_ms predicts. None when
      measure_peak was called with timed=False.
    losses: the loss of every step run, warm-up included.
    resident_bytes: what the model held at the start of the measured step.
    wall_ms: median wall time of a step (None when not timed).
    """

    peak_bytes: int
    step_ms: Optional[float]
    losses: List[float]
    resident_bytes: int
    wall_ms: Optional[float]


def check_loss(loss) -> torch.Tensor:
    """The step's loss; SacplanError unless it is a scalar that trains."""
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        shape = list(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise SacplanError(f"step must return the scalar loss tensor, not {shape}")
    if not loss.requires_grad:
        raise SacplanError("the loss does not require grad: nothing in the step trains")
    return loss


def train_step(model: nn.Module, step: Callable[[nn.Module], torch.Tensor],
               optimizer: Optional[torch.optim.Optimizer]) -> float:
    loss = check_loss(step(model))
    loss.backward()
    if optimizer is not None:
        optimizer.step()
    # Every step starts without gradients, as the simulator's step does.
    model.zero_grad(set_to_none=True)
    value = float(loss.detach())
    del loss
    return value


def _device_of(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    raise SacplanError("model has no parameters")


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_peak(model: nn.Module, step: Callable[[nn.Module], torch.Tensor], *,
                 optimizer: Optional[torch.optim.Optimizer] = None, steps: int = 3,
                 warmup: int = 1, timed: bool = True) -> Measurement:
    """Trains `warmup` + `steps` steps and measures their peak, then (when
    `timed`) `steps` more steps and times them.

    The peak is exact: on CPU from the profiler's allocation record, on CUDA
    from the caching allocator's max_memory_allocated. Times come from
    separate steps run without the profiler (it slows steps down); a caller
    that wants only the peak passes timed=False and saves those steps.
    Gradients are set to None after each step (zero_grad(set_to_none=True)).
    """
    if steps < 1:
        raise SacplanError("steps must be >= 1")
    if not any(p.requires_grad for p in model.parameters()):
        raise SacplanError("model has no parameters that require gradients")
    device = _device_of(model)
    losses = []
    for _ in range(warmup):
        losses.append(train_step(model, step, optimizer))
    peak = 0
    resident = 0
    for _ in range(steps):
        resident = resident_bytes(model, optimizer)
        if device.type == "cuda":
            sync(device)
            torch.cuda.reset_peak_memory_stats(device)
            start = torch.cuda.memory_allocated(device)
            losses.append(train_step(model, step, optimizer))
            sync(device)
            peak = max(peak, resident + torch.cuda.max_memory_allocated(device) - start)
        else:
            with AllocationLog(device) as log:
                losses.append(train_step(model, step, optimizer))
            peak = max(peak, resident + log.peak())
    if not timed:
        return Measurement(peak_bytes=peak, step_ms=None, losses=losses,
                           resident_bytes=resident, wall_ms=None)
    times, walls = [], []
    for _ in range(steps):
        sync(device)
        t0, c0 = time.perf_counter(), cpu_now()
        losses.append(train_step(model, step, optimizer))
        sync(device)
        walls.append((time.perf_counter() - t0) * 1e3)
        times.append(walls[-1] if device.type == "cuda" else (cpu_now() - c0) * 1e3)
    return Measurement(peak_bytes=peak, step_ms=statistics.median(times), losses=losses,
                       resident_bytes=resident, wall_ms=statistics.median(walls))

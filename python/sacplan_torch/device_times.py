"""Each op's device time on CUDA from the kernels it launched.

A CUDA event recorded before an op and one after it time everything the
device does in between, including its waits for the host. Where the
host (Python dispatch, the checkpoint policy per aten call, hooks) sets the
pace, as it does when a block's kernels are short, event spans would price
that host work as device time, recompute above all.
So on CUDA the op-times pass runs under torch.profiler (kineto, CUPTI),
each op's forward and backward inside a profiler range of its own
(record_function), and an op's device time is the sum of the durations of
the kernels, copies and memsets launched inside its range: the profiler
links each to the aten call that launched it by CUPTI's correlation id, and
the aten call to the range that encloses it on its thread
(FunctionEvent.device_time_total). Idle time between kernels is not counted.

KernelClock has Clock's span interface (start, stop, ms), so the tracer and
the backward hooks time ops with it unchanged; `ms` reads only after
`profiling()` has ended. The whole step's phases (forward, backward,
optimizer) get ranges too, for the head's and the optimizer's device time.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Dict, Iterable, Iterator

import torch
from torch.autograd.profiler import record_function

from .memory import _profiler_quiet

# Range names: unlikely in a model's own record_function ranges.
_PREFIX = "sacplan#"
_PHASE = _PREFIX + "phase:"


def kernel_ms_by_range(events: Iterable, prefix: str = _PREFIX) -> Dict[str, float]:
    """Per range named `prefix...`, the ms of the device work launched inside
    it: host-side ranges only (the profiler also lists each range once more
    as a device-side annotation, whose total is not a kernel sum).
    `events`: FunctionEvents (`name`, `device_type`, `device_time_total` in
    us), or anything shaped so."""
    out: Dict[str, float] = {}
    for event in events:
        if not event.name.startswith(prefix) or \
                event.device_type != torch.autograd.DeviceType.CPU:
            continue
        out[event.name] = out.get(event.name, 0.0) + event.device_time_total / 1e3
    return out


class KernelClock:
    """Spans that are profiler ranges (module doc); one clock per step."""

    def __init__(self) -> None:
        self._names = itertools.count()
        self._ms: Dict[str, float] = {}

    def start(self) -> record_function:
        span = record_function(f"{_PREFIX}{next(self._names)}")
        span.__enter__()
        return span

    def stop(self, begin: record_function) -> str:
        begin.__exit__(None, None, None)
        return begin.name

    def ms(self, span: str) -> float:
        """The span's kernel ms; 0 for a span that launched nothing."""
        return self._ms.get(span, 0.0)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        with record_function(_PHASE + name):
            yield

    def phase_ms(self, name: str) -> float:
        return self._ms.get(_PHASE + name, 0.0)

    @contextlib.contextmanager
    def profiling(self) -> Iterator[None]:
        """Runs the body under torch.profiler (CPU and CUDA activity) and
        reads every range's kernel time when it ends."""
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with _profiler_quiet("cuda"), torch.profiler.profile(activities=activities) as prof:
            yield
        self._ms = kernel_ms_by_range(prof.events())


def plain_checkpointed(records) -> None:
    """The device times of every op under checkpointing, from kernel times:
    its plain ones. The policy, the cache and checkpoint's hooks are host
    work; a re-run launches the forward's kernels; a cache pop none."""
    for record in records:
        for op in record.ops:
            op.checkpointed_fwd_ms = op.saved_fwd_ms = op.recompute_ms = op.fwd_ms
            op.checkpointed_bwd_ms = op.bwd_ms
            op.replay_ms = 0.0

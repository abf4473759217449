"""Spans of time on the device a model runs on."""

from __future__ import annotations

import time
from typing import Optional

import torch


def cpu_now() -> float:
    """The process's CPU time in seconds: what a CPU step costs whatever
    else shares the machine's cores, unlike the wall clock (a 2-core CI
    machine running other tests stretches wall time, not CPU time). The C++
    CPU profiler measures on the same clock."""
    return time.process_time()


class Clock:
    """Times spans on the device: the process CPU clock on CPU, CUDA events
    on GPU. A span is `stop(start())`; `ms(span)` reads it (after the
    device has synchronized, on GPU). `now()` marks a point; `between(a, b)`
    reads the time from one mark to a later one."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def now(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return cpu_now()

    def between(self, begin, end) -> float:
        if self.cuda:
            return begin.elapsed_time(end)
        return (end - begin) * 1e3

    def start(self):
        return self.now()

    def stop(self, begin):
        end = self.now()
        return (begin, end) if self.cuda else self.between(begin, end)

    def ms(self, span) -> float:
        if self.cuda:
            return self.between(*span)
        return span


class WallClock:
    """The host's clock: time.perf_counter, marks in seconds. On a GPU the
    host (the thread that issues work) and the device run apart, and what
    the host spends issuing an op (dispatch, the checkpoint policy, hooks)
    is read here. `now()` and `between(a, b)` as Clock's."""

    def now(self) -> float:
        return time.perf_counter()

    def between(self, begin: float, end: float) -> float:
        return (end - begin) * 1e3


class Clocks:
    """The clocks capture reads. `device`: each op's device time (Clock).
    `host`: the host's wall clock, or None where host and device are one
    clock (CPU: the profile then has no host times, exactly as before).
    `kernel_times`: per-op device times come from the profiler's kernel
    records (device_times.py) instead of `device`'s spans, so that they
    leave out the device's waits for the host; the checkpointed fields'
    device times are then the plain ones (the policy adds host work, not
    kernels). CUDA: Clocks.for_device; tests pair a wall host with the
    process clock as the device to run the two-clock path on a CPU."""

    def __init__(self, device: Clock, host: Optional[WallClock] = None,
                 kernel_times: bool = False):
        self.device, self.host, self.kernel_times = device, host, kernel_times

    @classmethod
    def for_device(cls, device: torch.device) -> "Clocks":
        if device.type == "cuda":
            return cls(Clock(device), WallClock(), kernel_times=True)
        return cls(Clock(device))

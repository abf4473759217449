"""Spans of time on the device a model runs on."""

from __future__ import annotations

import time

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

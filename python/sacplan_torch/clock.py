"""Spans of time on the device a model runs on."""

from __future__ import annotations

import time

import torch


class Clock:
    """Times spans on the device: wall clock on CPU, CUDA events on GPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def start(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def stop(self, begin):
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            return (begin, end)
        return (time.perf_counter() - begin) * 1e3

    def ms(self, span) -> float:
        if self.cuda:
            begin, end = span
            return begin.elapsed_time(end)
        return span


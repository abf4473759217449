"""Capture on a CPU prints nothing (issue 41, item 7d): torch's profiler,
which capture's allocation record uses, says two things a user cannot act
on, kineto's `gpuGetDeviceCount failed` line (from C++, to fd 2, once a
process, when a CUDA build of torch finds no GPU) and a UserWarning that a
profile keeps one cycle's events. Both come once a process, so the capture
runs in a fresh one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import torch

from sacplan_torch import memory

CAPTURE = textwrap.dedent("""
    import torch
    from torch import nn
    import sacplan_torch

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            return x + torch.tanh(self.fc(x))

    model = nn.Sequential(Block(), Block())
    sacplan_torch.capture(model, torch.randn(2, 4, 8), blocks=list(model), warmup=0,
                          repeats=1)
    x = torch.randn(2, 4, 8)
    sacplan_torch.measure_peak(model, lambda m: m(x).square().mean(), steps=1)
""")


def test_a_cpu_capture_in_a_fresh_process_prints_nothing():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", CAPTURE], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr == ""


def test_other_lines_on_fd_2_are_written_back(capfd):
    capfd.readouterr()
    with memory._profiler_quiet("cpu"):
        os.write(2, b"one\nERROR: gpuGetDeviceCount failed with code 35\ntwo\n")
    with memory.AllocationLog(torch.device("cpu")) as log:
        log.mark("m")
        os.write(2, b"inside\n")
    out, err = capfd.readouterr()
    assert (out, err) == ("", "one\ntwo\ninside\n")

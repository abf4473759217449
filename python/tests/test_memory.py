"""AllocationLog counts what it saw allocated: a block allocated while an
earlier profile of the process ran, and freed while this one runs, is not a
free of this log's (the profiler reports it, with the size its table kept).
Before, such frees took up to 480 KB off a measured peak depending on which
tests had profiled earlier in the process."""

from __future__ import annotations

import torch

import sacplan_torch
from sacplan_torch.memory import AllocationLog

CPU = torch.device("cpu")
BLOCK_BYTES = 4096 * 4


def allocate_while_dropping(held: list, count: int) -> list:
    """Allocates `count` blocks, keeping each, and drops one block of
    `held` before each allocation."""
    made = []
    for _ in range(count):
        if held:
            held.pop()
        made.append(torch.empty(4096))
    return made


def test_frees_of_blocks_an_earlier_log_saw_do_not_count():
    with AllocationLog(CPU):
        earlier = [torch.empty(4096) for _ in range(20)]
    with AllocationLog(CPU) as log:
        kept = allocate_while_dropping(earlier, 20)
        log.mark("end")
    assert log.live("end") == 20 * BLOCK_BYTES
    assert log.peak() == 20 * BLOCK_BYTES
    del kept


def test_measure_peak_does_not_depend_on_what_was_profiled_before():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(),
                                torch.nn.Linear(256, 256))
    batch = torch.randn(64, 256)

    def step(m):
        return m(batch).square().mean()

    first = sacplan_torch.measure_peak(model, step, steps=1).peak_bytes
    with AllocationLog(CPU):
        leftovers = [torch.empty(65536) for _ in range(8)]

    def step_that_drops(m):
        if leftovers:
            leftovers.pop()
        return step(m)

    again = sacplan_torch.measure_peak(model, step_that_drops, steps=1, warmup=0).peak_bytes
    assert again == first

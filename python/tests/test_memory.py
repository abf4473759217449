"""AllocationLog counts what it saw allocated: a block allocated while an
earlier profile of the process ran, and freed while this one runs, is not a
free of this log's (the profiler reports it, with the size its table kept).
Before, such frees took up to 480 KB off a measured peak depending on which
tests had profiled earlier in the process. And measure_peak(timed=False)
measures the same peak without its timed steps."""

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


def test_measure_peak_untimed_skips_the_timed_steps_and_keeps_the_peak():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.Tanh())
    batch = torch.randn(32, 128)
    calls = []

    def step(m):
        calls.append(1)
        return m(batch).square().mean()

    optimizer = torch.optim.AdamW(model.parameters())
    timed = sacplan_torch.measure_peak(model, step, optimizer=optimizer, steps=2)
    assert len(calls) == 1 + 2 + 2 and timed.step_ms is not None
    calls.clear()
    untimed = sacplan_torch.measure_peak(model, step, optimizer=optimizer, steps=2,
                                         timed=False)
    assert len(calls) == 1 + 2
    assert untimed.step_ms is None and untimed.wall_ms is None
    assert untimed.peak_bytes == timed.peak_bytes
    assert len(untimed.losses) == 3

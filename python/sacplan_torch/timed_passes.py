"""The timed passes of capture: op times under a timing-only tracer, plain
steps' phase and block times, and what checkpoint's saved-tensor hooks add
to each op's backward (rerun_timing.py times the rest of what selective
checkpointing costs). Each takes capture's step (capture._Step)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import List, Optional

from . import distributed, rerun_timing
from .clock import Clock
from .graph import BlockRecord
from .memory import sync
from .progress import Progress
from .tracer import Tracer


def add_samples(traces, clock: Clock, fwd_samples, bwd_samples) -> None:
    """One step's forward and backward time per op, appended per block."""
    for i, trace in enumerate(traces):
        for op_id, spans in trace.fwd_spans.items():
            fwd_samples[i][op_id].append(sum(clock.ms(s) for s in spans))
        for op_id, spans in trace.bwd_spans.items():
            bwd_samples[i][op_id].append(sum(clock.ms(s) for s in spans))


def time_ops(s, repeats: int, fwd_samples, bwd_samples,
              bar: Progress) -> Optional[distributed.CollectiveSync]:
    """Steps under a tracer that only times: each op's forward and
    backward. Collectives complete before they return while timed, so an
    all-to-all op's time is the exchange's, and FSDP2's all-gathers and
    reduce-scatters are timed per block (returned)."""
    collectives = distributed.CollectiveSync(settle=False) if distributed.active() else None
    for _ in range(repeats):
        timer = Tracer(s.found, s.resident, s.clock, structure=False)
        try:
            if collectives is not None:
                collectives.__enter__()
            try:
                with timer:
                    loss = s.loss()
                s.finish(loss)
            finally:
                if collectives is not None:
                    collectives.__exit__(None, None, None)
            del loss
            sync(s.device)
        finally:
            timer.remove()
        add_samples(timer.traces, s.clock, fwd_samples, bwd_samples)
        bar.advance("op times")
    return collectives


def time_plain_steps(s, repeats: int, bar: Progress):
    """Plain steps: the time of each phase and of each block's forward, with
    no dispatch mode in the way (process CPU time on CPU, wall time after a
    synchronize on GPU)."""
    phase = defaultdict(list)
    block_ms = [[] for _ in s.found]
    for _ in range(repeats):
        starts = {}
        handles = []
        for i, (_, module) in enumerate(s.found):
            def pre(module, args, i=i):
                starts[i] = s.tick()

            def post(module, args, output, i=i):
                block_ms[i].append((s.tick() - starts[i]) * 1e3)

            handles.append(module.register_forward_pre_hook(pre))
            handles.append(module.register_forward_hook(post))
        try:
            for name, ms in s.timed_step().items():
                phase[name].append(ms)
        finally:
            for handle in handles:
                handle.remove()
        bar.advance("step times")
    return phase, block_ms


def share_unpacking(records: List[BlockRecord], rerun: rerun_timing.RerunTimes,
                     phase) -> None:
    """Each op's checkpointed_bwd_ms: its bwd_ms plus a share of what
    checkpoint's saved-tensor hooks add to a backward, by the number of
    tensors the op's backward reads (rerun_timing.py)."""
    added_ms = max(0.0, statistics.median(rerun.backward_ms)
                   - statistics.median(phase["backward"]))
    reads = sum(len(op.backward_needs) for r in records for op in r.ops)
    for r in records:
        for op in r.ops:
            op.checkpointed_bwd_ms = op.bwd_ms + (
                added_ms * len(op.backward_needs) / reads if reads else 0.0)

"""The timed passes of capture: op times under a timing-only tracer, plain
steps' phase and block times, and steps with every block checkpointed
(rerun_timing.py), which time what selective checkpointing costs per op.

The passes take turns, one step each, `repeats` times over (run_passes).
On a CPU whose speed changes every few seconds, passes run one after the
other can each see a different speed, and a profile that mixes them
predicts checkpointing too dear or too cheap against a plain step; taking
turns, every pass samples every speed its neighbours do. Each pass takes
capture's step (train_step.TrainStep)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Dict, List, Optional

from . import distributed, host_times, rerun_timing
from .graph import BlockRecord
from .memory import sync
from .progress import Progress
from .tracer import Tracer


def add_samples(traces, clock, fwd_samples, bwd_samples) -> None:
    """One step's forward and backward time per op, appended per block;
    `clock` reads the spans the traces hold (Clock, KernelClock,
    SpanClocks: the device's time)."""
    for i, trace in enumerate(traces):
        for op_id, spans in trace.fwd_spans.items():
            fwd_samples[i][op_id].append(sum(clock.ms(s) for s in spans))
        for op_id, spans in trace.bwd_spans.items():
            bwd_samples[i][op_id].append(sum(clock.ms(s) for s in spans))


class OpTimes:
    """Steps under a tracer that only times: each op's forward and backward
    (appended to fwd_samples and bwd_samples). Collectives complete before
    they return while timed, so an all-to-all op's time is the exchange's,
    and FSDP2's all-gathers and reduce-scatters are timed per block
    (`collectives`, None outside a process group). With a host clock each
    op's host time too (`host`, host_times.py); with kernel times (CUDA)
    the step runs under torch.profiler, and `kernel_phase` gets the
    device's kernel ms of each phase (forward, backward, optimizer)."""

    def __init__(self, s, fwd_samples, bwd_samples):
        self.s, self.fwd_samples, self.bwd_samples = s, fwd_samples, bwd_samples
        self.collectives: Optional[distributed.CollectiveSync] = (
            distributed.CollectiveSync(settle=False) if distributed.active() else None)
        self.host = host_times.HostSamples(len(s.found)) if s.clocks.host is not None else None
        self.kernel_phase: Dict[str, List[float]] = defaultdict(list)

    def step(self) -> None:
        s = self.s
        clock, kernels = host_times.pass_clock(s.clocks)
        timer = Tracer(s.found, s.resident, clock, structure=False)
        try:
            if self.collectives is not None:
                self.collectives.__enter__()
            try:
                with host_times.profiling(kernels):
                    with host_times.phase(kernels, "forward"), timer:
                        loss = s.loss()
                    with host_times.phase(kernels, "backward"):
                        loss.backward()
                    with host_times.phase(kernels, "optimizer"):
                        if s.optimizer is not None:
                            s.optimizer.step()
                    s.model.zero_grad(set_to_none=True)
            finally:
                if self.collectives is not None:
                    self.collectives.__exit__(None, None, None)
            del loss
            sync(s.device)
        finally:
            timer.remove()
        add_samples(timer.traces, clock, self.fwd_samples, self.bwd_samples)
        if self.host is not None:
            self.host.add(timer.traces, clock)
        if kernels is not None:
            for name in ("forward", "backward", "optimizer"):
                self.kernel_phase[name].append(kernels.phase_ms(name))


class PlainSteps:
    """Plain steps: the time of each phase (`phase`, name -> ms per step)
    and of each block's forward (`block_ms`, per block), with no dispatch
    mode in the way (process CPU time on CPU, wall time after a synchronize
    on GPU)."""

    def __init__(self, s, host: Optional[host_times.HostSamples] = None):
        self.s = s
        self.phase = defaultdict(list)
        self.block_ms: List[List[float]] = [[] for _ in s.found]
        self.host = host

    def step(self) -> None:
        s = self.s
        starts = {}
        handles = []
        for i, (_, module) in enumerate(s.found):
            def pre(module, args, i=i):
                starts[i] = s.tick(), s.host_now()

            def post(module, args, output, i=i):
                # The host's time issuing the block: up to its return,
                # before the synchronize.
                issued = s.host_now()
                self.block_ms[i].append((s.tick() - starts[i][0]) * 1e3)
                if self.host is not None:
                    self.host.block_ms[i].append((issued - starts[i][1]) * 1e3)

            handles.append(module.register_forward_pre_hook(pre))
            handles.append(module.register_forward_hook(post))
        try:
            for name, ms in s.timed_step().items():
                self.phase[name].append(ms)
        finally:
            for handle in handles:
                handle.remove()


def run_passes(repeats: int, op_times: OpTimes, plain: PlainSteps,
               rerun: rerun_timing.RerunPasses, bar: Progress) -> None:
    """`repeats` rounds of one step of each pass, in turn: op times, a
    plain step, then checkpointed steps recomputing every call and saving
    every call a plan may. The bar advances after each step."""
    for _ in range(repeats):
        op_times.step()
        bar.advance("op times")
        plain.step()
        bar.advance("step times")
        for save in (False, True):
            rerun.step(save)
            bar.advance("checkpoint times")


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

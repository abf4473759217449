"""Each op's host time: what the thread that issues work spends on it.

On a GPU the host and the device run apart: the host issues an op
(Python, dispatch, hooks, the selective-checkpoint policy) and the device
runs its kernels later, or waits for the host when the host is the slower
of the two. The planner's two-timeline model (docs/profile_format.md, op
"host") needs both. Capture reads the host on the wall clock
(clock.WallClock), beside the device's clock, in the passes it already
runs (timed_passes.py, rerun_timing.py):

- fwd_ms: the op-times pass times each call on both clocks (SpanClocks);
  the per-op medians are scaled so that a block's ops add up to the host
  time of the block's forward in the plain steps (from after the
  synchronize before it to its return): the spans miss what runs between
  calls (the block's own Python, module hooks) and include the tracer's
  own work, as the device's forward times do on CPU.
- bwd_ms: the node hooks' spans on the host clock (medians).
- checkpointed_fwd_ms, saved_fwd_ms, recompute_ms, replay_ms: the
  checkpointed steps' segments, with a host mark beside each device mark
  at every policy call (rerun_timing.py).
- checkpointed_bwd_ms: bwd_ms plus a share of what a checkpointed step's
  backward takes on the host beyond a plain one's, less its re-runs, by
  the tensors each op's backward reads (as the device's).

Without a host clock (CPU: one clock) nothing here runs and the profile
has no host times. A syncing op's host time includes its wait for the
device (sync_ops.py).
"""

from __future__ import annotations

import contextlib
import statistics
from collections import defaultdict
from typing import Dict, List, Optional, Tuple

from .clock import Clocks, WallClock
from .device_times import KernelClock

HOST_FIELDS = ("fwd_ms", "bwd_ms", "checkpointed_fwd_ms", "saved_fwd_ms",
               "checkpointed_bwd_ms", "recompute_ms", "replay_ms")


class SpanClocks:
    """Clock's span interface over a device clock and the host's: a span is
    (device span, host ms); `ms` reads the device's, `host_ms` the host's.
    The host's span is the inner one, so the device clock's own work
    (a profiler range, an event record) is not counted on it."""

    def __init__(self, device, host: WallClock):
        self.device, self.host = device, host

    def start(self) -> Tuple[object, float]:
        begin = self.device.start()
        return begin, self.host.now()

    def stop(self, begin: Tuple[object, float]) -> Tuple[object, float]:
        host_ms = self.host.between(begin[1], self.host.now())
        return self.device.stop(begin[0]), host_ms

    def ms(self, span) -> float:
        return self.device.ms(span[0])

    @staticmethod
    def host_ms(span) -> float:
        return span[1]


def pass_clock(clocks: Clocks):
    """The clock the op-times pass times each op with, and the KernelClock
    inside it when per-op device times come from kernels (else None)."""
    kernels = KernelClock() if clocks.kernel_times else None
    device = kernels if kernels is not None else clocks.device
    return (SpanClocks(device, clocks.host) if clocks.host is not None else device), kernels


def profiling(kernels: Optional[KernelClock]):
    return kernels.profiling() if kernels is not None else contextlib.nullcontext()


def phase(kernels: Optional[KernelClock], name: str):
    return kernels.phase(name) if kernels is not None else contextlib.nullcontext()


class HostSamples:
    """Per block, op id -> the host ms of its forward (`fwd`) and backward
    (`bwd`) in each op-times step; per block, the host ms of its forward
    in each plain step (`block_ms`)."""

    def __init__(self, blocks: int):
        self.fwd: List[Dict[str, List[float]]] = [defaultdict(list) for _ in range(blocks)]
        self.bwd: List[Dict[str, List[float]]] = [defaultdict(list) for _ in range(blocks)]
        self.block_ms: List[List[float]] = [[] for _ in range(blocks)]

    def add(self, traces, clock: SpanClocks) -> None:
        for i, trace in enumerate(traces):
            for op_id, spans in trace.fwd_spans.items():
                self.fwd[i][op_id].append(sum(clock.host_ms(s) for s in spans))
            for op_id, spans in trace.bwd_spans.items():
                self.bwd[i][op_id].append(sum(clock.host_ms(s) for s in spans))


def _median(samples: List[float]) -> float:
    return statistics.median(samples) if samples else 0.0


def fill(records, samples: HostSamples, host_rerun, phase_ms: Dict[str, List[float]]) -> None:
    """Gives every op of `records` its `host` dict (HOST_FIELDS, ms).
    host_rerun: rerun_timing.RerunTimes on the host clock. phase_ms: the
    plain steps' phases (`host_backward` read)."""
    for i, record in enumerate(records):
        fwd = {op.id: _median(samples.fwd[i][op.id]) for op in record.ops}
        total = sum(fwd.values())
        if total > 0 and samples.block_ms[i]:
            scale = statistics.median(samples.block_ms[i]) / total
            fwd = {op_id: ms * scale for op_id, ms in fwd.items()}
        rerun = {field: host_rerun.per_op_ms(field, i) for field in host_rerun.samples}
        for op in record.ops:
            host = {"fwd_ms": fwd[op.id], "bwd_ms": _median(samples.bwd[i][op.id])}
            host["checkpointed_fwd_ms"] = rerun["checkpointed_fwd_ms"].get(op.id, host["fwd_ms"])
            host["saved_fwd_ms"] = rerun["saved_fwd_ms"].get(op.id, host["checkpointed_fwd_ms"])
            host["recompute_ms"] = rerun["recompute_ms"].get(op.id, host["fwd_ms"])
            host["replay_ms"] = rerun["replay_ms"].get(op.id, 0.0)
            op.host = host
    added_ms = 0.0
    if host_rerun.backward_ms and phase_ms.get("host_backward"):
        added_ms = max(0.0, statistics.median(host_rerun.backward_ms)
                       - statistics.median(phase_ms["host_backward"]))
    reads = sum(len(op.backward_needs) for r in records for op in r.ops)
    for r in records:
        for op in r.ops:
            op.host["checkpointed_bwd_ms"] = op.host["bwd_ms"] + (
                added_ms * len(op.backward_needs) / reads if reads else 0.0)


def fixed_host(records, phase_ms: Dict[str, List[float]]) -> Dict[str, float]:
    """The profile's `fixed.host`: the plain steps' host time of each phase
    less the blocks' ops in it."""
    blocks_fwd = sum(op.host["fwd_ms"] for r in records for op in r.ops)
    blocks_bwd = sum(op.host["bwd_ms"] for r in records for op in r.ops)
    return {"head_fwd_ms": round(max(0.0, _median(phase_ms["host_forward"]) - blocks_fwd), 6),
            "head_bwd_ms": round(max(0.0, _median(phase_ms["host_backward"]) - blocks_bwd), 6),
            "optimizer_ms": round(_median(phase_ms["host_optimizer"]), 6)}

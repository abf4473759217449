"""What PyTorch's selective checkpointing costs per op (torch-sac plans).

A checkpointed block calls the selective-checkpoint policy before each of
its aten calls, in the forward and again in backward's re-run, and the
re-run either runs a call again (recomputed) or pops its cached output
(saved). On a GPU that bookkeeping hides behind the kernels; on a CPU, or
with small ops, it is a large part of what checkpointing costs, and an op's
plain forward time does not predict it.

Two kinds of training step with every block checkpointed measure it
(RerunPasses; capture has them take turns with its other passes): in the
first the policy recomputes every call, in the second it saves every call
it may (collectives are always saved; an op written in place later can
never be). The policy runs before each call, so the time from one call's
policy to the next is what that call costs under checkpointing: the op, the
policy, the dispatch and the Python between. Views and other calls that are
not ops of the profile add their time to the op before them; what
checkpoint itself does around a block's forward (its contexts and hooks,
saving the RNG state), measured from the call to checkpoint to its return,
adds to the first op and the last. Per op:
- checkpointed_fwd_ms: its forward inside checkpoint, unsaved (first pass);
- saved_fwd_ms: its forward inside checkpoint, saved: the policy also
  detaches and caches its outputs (second pass);
- recompute_ms: the re-run when it is recomputed (first pass);
- replay_ms: the re-run when it is saved, a cache pop (second pass);
- checkpointed_bwd_ms: its backward inside a checkpointed block. Backward
  unpacks every tensor autograd saved through checkpoint's hooks, whatever
  the policy saves; the first pass's backward less its re-runs and less a
  plain step's backward is what they add, shared over the ops by the
  tensors their backward reads (capture does this, from RerunTimes).
The re-run runs to the block's end here (early stop off); the simulator
charges only the calls the re-run reaches.

On a GPU each policy call is marked on the host's wall clock only, for the
op's host times (host_times.py): the device's time under checkpointing is
its plain kernel time (device_times.plain_checkpointed). With two clocks on
a CPU (tests) both are marked, the device's first.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from collections import defaultdict
from typing import Callable, Dict, List, Optional, Set, Tuple

from torch import nn
from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                    create_selective_checkpoint_contexts,
                                    set_checkpoint_early_stop)

from .clock import Clocks
from .naming import OpNamer, is_collective, is_named

# op id -> per-step samples, per block, for each measured figure.
Samples = List[Dict[str, List[float]]]


class _Segment:
    """One run of a block's forward: the forward or a re-run. Marks are
    (op id, time) at each policy call, then (None, time) at the end, on
    each of `clocks` (kind -> clock: "device", and "host" on a GPU, whose
    mark goes beside the device's)."""

    def __init__(self, clocks: Dict[str, object]):
        self.clocks = clocks
        self.recompute: Optional[bool] = None
        self.marks: Dict[str, List[Tuple[Optional[str], object]]] = {
            kind: [(None, t)] for kind, t in now(clocks).items()}

    def mark(self, op_id: Optional[str]) -> None:
        for kind, t in now(self.clocks).items():
            self.marks[kind].append((op_id, t))

    def widen(self, begin: Dict[str, object], end: Dict[str, object]) -> None:
        """Starts the segment at `begin` and ends it at `end` (per kind): a
        forward's segment then spans checkpoint's own work around the block
        (its contexts, saved-tensor hooks, RNG state), which falls to the
        first and the last op."""
        for kind, marks in self.marks.items():
            marks[0] = (None, begin[kind])
            marks[-1] = (None, end[kind])

    def span_ms(self, kind: str) -> float:
        marks = self.marks[kind]
        return self.clocks[kind].between(marks[0][1], marks[-1][1])

    def per_op_ms(self, op_ids: Set[str], kind: str) -> Dict[str, float]:
        """Each profile op's share on the `kind` clock: from its call to the
        next, plus what runs after it before the next op (views, Python);
        what runs before the first op goes to the first op."""
        marks, clock = self.marks[kind], self.clocks[kind]
        spent: Dict[str, float] = defaultdict(float)
        owner: Optional[str] = None
        before_first = 0.0
        for (op_id, t0), (_, t1) in zip(marks, marks[1:]):
            if op_id in op_ids:
                owner = op_id
            elapsed = clock.between(t0, t1)
            if owner is None:
                before_first += elapsed
            else:
                spent[owner] += elapsed
        if owner is not None:
            first = next(op_id for op_id, _ in marks if op_id in op_ids)
            spent[first] += before_first
        return spent


def now(clocks: Dict[str, object]) -> Dict[str, object]:
    """A mark on every clock, the device's first (on CUDA an event record,
    which the host's mark after it does not count)."""
    return {kind: clock.now() for kind, clock in clocks.items()}


class _Checkpointed:
    """Every block under checkpoint, saving the ops `saved` names per block
    (collectives always) and recomputing every other call; records a
    _Segment per forward and per re-run."""

    def __init__(self, found: List[Tuple[str, nn.Module]], clocks: Dict[str, object],
                 saved: Optional[List[Set[str]]]):
        self.segments: List[List[_Segment]] = [[] for _ in found]
        self._undo: List[Callable[[], None]] = []
        for i, (_, block) in enumerate(found):
            self._wrap(i, block, clocks, saved[i] if saved is not None else set())

    def _wrap(self, index: int, block: nn.Module, clocks: Dict[str, object],
              saved: Set[str]) -> None:
        namer = OpNamer(block)
        original = block.forward
        current: List[_Segment] = []

        def policy(ctx, func, *args, **kwargs):
            if not is_named(func):
                return CheckpointPolicy.PREFER_RECOMPUTE
            op_id = namer.name(func)
            segment = current[-1]
            segment.recompute = ctx.is_recompute
            segment.mark(op_id)
            if is_collective(func) or op_id in saved:
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE

        def run(*args, **kwargs):
            namer.reset()
            current.append(_Segment(clocks))
            out = original(*args, **kwargs)
            current[-1].mark(None)
            self.segments[index].append(current[-1])
            return out

        def forward(*args, **kwargs):
            begin = now(clocks)
            out = checkpoint(
                run, *args, use_reentrant=False,
                context_fn=functools.partial(create_selective_checkpoint_contexts, policy),
                **kwargs)
            self.segments[index][-1].widen(begin, now(clocks))
            return out

        block.forward = forward

        def undo():
            namer.remove()
            del block.forward

        self._undo.append(undo)

    def remove(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo = []


@dataclasses.dataclass
class RerunTimes:
    """samples: for each of checkpointed_fwd_ms, saved_fwd_ms, recompute_ms
    and replay_ms (see the module doc), the samples per block and op.
    spans: for each, per block, the whole segment's ms per sample (the sum
    of that segment's op samples).
    backward_ms: per step of the first pass, its backward phase less the
    re-runs in it: plain backward plus what checkpoint's saved-tensor hooks
    add to it."""

    samples: Dict[str, Samples]
    spans: Dict[str, List[List[float]]]
    backward_ms: List[float]

    def per_op_ms(self, field: str, block: int) -> Dict[str, float]:
        """Each op's median, scaled so that the block's ops add up to the
        median segment. A median per op leaves out the rare slow sample
        (a garbage collection, a page fault) that falls on some op in
        every segment, so the medians' sum runs below what a segment
        takes, the more so the busier the machine. The plain forward is
        scaled to its block's time the same way (capture._block_records)."""
        samples = self.samples[field][block]
        medians = {op_id: statistics.median(v) for op_id, v in samples.items() if v}
        total = sum(medians.values())
        spans = self.spans[field][block]
        if total <= 0 or not spans:
            return medians
        scale = max(1.0, statistics.median(spans) / total)
        return {op_id: ms * scale for op_id, ms in medians.items()}


class RerunPasses:
    """Training steps with every block checkpointed, one per `step`: saving
    nothing a plan could (save False) or every op a plan may (save True).
    `times` gathers what they measure on the device's clock (None when
    clocks.kernel_times: the device times of checkpointed ops are then the
    plain ones, device_times.py), `host_times` on the host's (None
    without a host clock). `run_step()` trains one step and returns its
    phases (TrainStep.timed_step: "backward", and "host_backward" with a
    host clock)."""

    FIELDS = {(False, False): "checkpointed_fwd_ms", (True, False): "saved_fwd_ms",
              (False, True): "recompute_ms", (True, True): "replay_ms"}
    # The phase each clock's backward is read from.
    BACKWARD = {"device": "backward", "host": "host_backward"}

    def __init__(self, found: List[Tuple[str, nn.Module]], clocks: Clocks,
                 op_ids: List[Set[str]], never_save: List[Set[str]],
                 run_step: Callable[[], Dict[str, float]]):
        self.found, self.op_ids, self.run_step = found, op_ids, run_step
        self.clocks: Dict[str, object] = {}
        if not clocks.kernel_times:
            self.clocks["device"] = clocks.device
        if clocks.host is not None:
            self.clocks["host"] = clocks.host
        # Saved: the ops a plan may save (apply_plan saves nothing else).
        self.savable = [ids - never for ids, never in zip(op_ids, never_save)]
        fields = self.FIELDS.values()
        self.by_clock = {
            kind: RerunTimes({field: [defaultdict(list) for _ in found] for field in fields},
                             {field: [[] for _ in found] for field in fields}, [])
            for kind in self.clocks}
        self.times: Optional[RerunTimes] = self.by_clock.get("device")
        self.host_times: Optional[RerunTimes] = self.by_clock.get("host")

    def step(self, save: bool) -> None:
        wrapped = _Checkpointed(self.found, self.clocks, self.savable if save else None)
        try:
            with set_checkpoint_early_stop(False):
                phases = self.run_step()
        finally:
            wrapped.remove()
        for kind, times in self.by_clock.items():
            if not save:
                times.backward_ms.append(phases[self.BACKWARD[kind]] - sum(
                    s.span_ms(kind) for segments in wrapped.segments for s in segments
                    if s.recompute))
            for i, segments in enumerate(wrapped.segments):
                for segment in segments:
                    if segment.recompute is None:
                        continue
                    field = self.FIELDS[(save, segment.recompute)]
                    shares = segment.per_op_ms(self.op_ids[i], kind)
                    for op_id, ms in shares.items():
                        times.samples[field][i][op_id].append(ms)
                    times.spans[field][i].append(sum(shares.values()))

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

from .clock import Clock
from .naming import OpNamer, is_collective, is_named

# op id -> per-step samples, per block, for each measured figure.
Samples = List[Dict[str, List[float]]]


class _Segment:
    """One run of a block's forward: the forward or a re-run. Marks are
    (op id, time) at each policy call, then (None, time) at the end."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self.recompute: Optional[bool] = None
        self.marks: List[Tuple[Optional[str], object]] = [(None, clock.now())]

    def mark(self, op_id: Optional[str]) -> None:
        self.marks.append((op_id, self.clock.now()))

    def widen(self, begin, end) -> None:
        """Starts the segment at `begin` and ends it at `end`: a forward's
        segment then spans checkpoint's own work around the block (its
        contexts, saved-tensor hooks, RNG state), which falls to the first
        and the last op."""
        self.marks[0] = (None, begin)
        self.marks[-1] = (None, end)

    def span_ms(self) -> float:
        return self.clock.between(self.marks[0][1], self.marks[-1][1])

    def per_op_ms(self, op_ids: Set[str]) -> Dict[str, float]:
        """Each profile op's share: from its call to the next, plus what runs
        after it before the next op (views, Python); what runs before the
        first op goes to the first op."""
        spent: Dict[str, float] = defaultdict(float)
        owner: Optional[str] = None
        before_first = 0.0
        for (op_id, t0), (_, t1) in zip(self.marks, self.marks[1:]):
            if op_id in op_ids:
                owner = op_id
            elapsed = self.clock.between(t0, t1)
            if owner is None:
                before_first += elapsed
            else:
                spent[owner] += elapsed
        if owner is not None:
            first = next(op_id for op_id, _ in self.marks if op_id in op_ids)
            spent[first] += before_first
        return spent


class _Checkpointed:
    """Every block under checkpoint, saving the ops `saved` names per block
    (collectives always) and recomputing every other call; records a
    _Segment per forward and per re-run."""

    def __init__(self, found: List[Tuple[str, nn.Module]], clock: Clock,
                 saved: Optional[List[Set[str]]]):
        self.segments: List[List[_Segment]] = [[] for _ in found]
        self._undo: List[Callable[[], None]] = []
        for i, (_, block) in enumerate(found):
            self._wrap(i, block, clock, saved[i] if saved is not None else set())

    def _wrap(self, index: int, block: nn.Module, clock: Clock, saved: Set[str]) -> None:
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
            current.append(_Segment(clock))
            out = original(*args, **kwargs)
            current[-1].mark(None)
            self.segments[index].append(current[-1])
            return out

        def forward(*args, **kwargs):
            begin = clock.now()
            out = checkpoint(
                run, *args, use_reentrant=False,
                context_fn=functools.partial(create_selective_checkpoint_contexts, policy),
                **kwargs)
            self.segments[index][-1].widen(begin, clock.now())
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
        takes: on the unseen MoE block under checkpointing, by 10-15% on
        this 2-core machine. The plain forward is scaled to its block's
        time the same way (capture._block_records)."""
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
    nothing a plan could (save False) or every op a plan may (save True);
    `times` gathers what they measure. `run_step()` trains one step and
    returns its backward phase's ms."""

    FIELDS = {(False, False): "checkpointed_fwd_ms", (True, False): "saved_fwd_ms",
              (False, True): "recompute_ms", (True, True): "replay_ms"}

    def __init__(self, found: List[Tuple[str, nn.Module]], clock: Clock,
                 op_ids: List[Set[str]], never_save: List[Set[str]],
                 run_step: Callable[[], float]):
        self.found, self.clock, self.op_ids, self.run_step = found, clock, op_ids, run_step
        # Saved: the ops a plan may save (apply_plan saves nothing else).
        self.savable = [ids - never for ids, never in zip(op_ids, never_save)]
        fields = self.FIELDS.values()
        self.times = RerunTimes({field: [defaultdict(list) for _ in found] for field in fields},
                                {field: [[] for _ in found] for field in fields}, [])

    def step(self, save: bool) -> None:
        wrapped = _Checkpointed(self.found, self.clock, self.savable if save else None)
        try:
            with set_checkpoint_early_stop(False):
                backward_ms = self.run_step()
        finally:
            wrapped.remove()
        if not save:
            self.times.backward_ms.append(backward_ms - sum(
                s.span_ms() for segments in wrapped.segments for s in segments
                if s.recompute))
        for i, segments in enumerate(wrapped.segments):
            for segment in segments:
                if segment.recompute is None:
                    continue
                field = self.FIELDS[(save, segment.recompute)]
                shares = segment.per_op_ms(self.op_ids[i])
                for op_id, ms in shares.items():
                    self.times.samples[field][i][op_id].append(ms)
                self.times.spans[field][i].append(sum(shares.values()))

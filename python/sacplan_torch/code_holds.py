"""When a block's own Python code lets go of each tensor it makes.

Autograd frees an activation nothing saved as soon as no Python name
refers to it, and a local variable refers to it until the variable is
rebound or the block's forward returns, often well after its last reader.
In a FLUX-style block the post-norm q and k of each stream, bound to locals
before the joint attention, live until the block returns, so the
simulator's last-reader rule alone would put such a block's peak low.
Recorded in the profile as the output's `held_until` (the op after
which the tensor's storage really goes), which the simulator applies to the
forward and to a checkpoint's re-run (docs/memory_model.md, "Tensors the
block's code holds").

One training step runs with every block under plain (non-selective)
checkpointing, so that autograd holds none of a block's tensors in the
forward and each storage lives exactly as long as the block's code keeps a
view of it. A dispatch mode, inside the checkpoint, notes each op's new
storages and, before each later call, which of them are gone.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint

from .naming import OpNamer, is_named
from .storage import (StorageKey, fresh_outputs, output_id, storage_key, tensors_of,
                      written_args)

# Per block: tensor id -> the op after which its storage was freed.
Holds = List[Dict[str, str]]


class _Lifetimes(TorchDispatchMode):
    """Names a block's calls and their outputs as the tracer does
    (OpNamer, storage.fresh_outputs, storage.output_id) and records when each output's storage
    dies: after the last op that made new storage before the death was seen."""

    def __init__(self, namer: OpNamer):
        super().__init__()
        self.namer = namer
        self.live: Dict[StorageKey, Tuple[str, StorageWeakRef]] = {}
        self.freed_after: Dict[str, str] = {}
        self.last_op: Optional[str] = None

    def sweep(self) -> None:
        for key, (tensor_id, ref) in list(self.live.items()):
            if ref.expired():
                del self.live[key]
                if self.last_op is not None:
                    self.freed_after[tensor_id] = self.last_op

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not is_named(func):
            return func(*args, **kwargs)
        op_id = self.namer.name(func)
        self.sweep()
        out = func(*args, **kwargs)
        self.sweep()
        in_keys = {storage_key(t) for t in tensors_of((args, kwargs))}
        written = {storage_key(t) for t in written_args(func, args, kwargs)}
        # Storage written in place holds several versions (tensors of the
        # profile) at once: its death says nothing of any one of them.
        for key in written:
            self.live.pop(key, None)
        fresh = fresh_outputs(out, in_keys, written)
        for j, (key, o) in enumerate(fresh):
            if key not in in_keys:
                self.live[key] = (output_id(op_id, j), StorageWeakRef(o.untyped_storage()))
        if fresh:
            self.last_op = op_id
        return out


def measure(found: List[Tuple[str, nn.Module]], train_step) -> Holds:
    """Trains one step (`train_step()`) with every block checkpointed and
    returns, per block, when each of its tensors was freed in the forward.
    Tensors still alive when the block returns (its outputs, or what
    something outside the block keeps) are left out."""
    holds: Holds = [{} for _ in found]
    undo = []
    for i, (_, block) in enumerate(found):
        undo.append(_wrap(block, holds[i]))
    try:
        train_step()
    finally:
        for remove in reversed(undo):
            remove()
    return holds


def _wrap(block: nn.Module, freed_after: Dict[str, str]):
    namer = OpNamer(block)
    original = block.forward
    seen = []

    def run(*args, **kwargs):
        # The re-run in backward is the same code; the forward alone is read.
        if seen:
            return original(*args, **kwargs)
        seen.append(True)
        namer.reset()
        mode = _Lifetimes(namer)
        with mode:
            out = original(*args, **kwargs)
        mode.sweep()
        freed_after.update(mode.freed_after)
        return out

    def forward(*args, **kwargs):
        return checkpoint(run, *args, use_reentrant=False, **kwargs)

    block.forward = forward

    def remove():
        namer.remove()
        del block.forward

    return remove


def apply(traces, holds: Holds) -> None:
    """Gives each output its `held_until` where the block's code frees it
    after its last reader (and after its producer)."""
    for trace, freed_after in zip(traces, holds):
        position = {op.id: k for k, op in enumerate(trace.ops)}
        last_reader: Dict[str, int] = {}
        for k, op in enumerate(trace.ops):
            for tensor_id in op.inputs:
                last_reader[tensor_id] = k
        for k, op in enumerate(trace.ops):
            for out in op.outputs:
                until = position.get(freed_after.get(out.id, ""), -1)
                if until > max(k, last_reader.get(out.id, -1)):
                    out.held_until = trace.ops[until].id

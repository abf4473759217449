"""Offloading a block's kept activations to host memory, as a plan says.

Three ways in, one per place PyTorch keeps an activation for backward
(docs/python.md, "Offload"):

- An op's output in a checkpointed block. Selective checkpointing keeps
  what its policy saves in its own cache, which `saved_tensors_hooks` never
  sees (pytorch #190581). So the policy recomputes an offloaded op instead,
  and two dispatch modes under checkpoint's own take its place: in the
  forward, `_CopyOutputs` copies the op's outputs to the host as the op
  returns; in the re-run, `_ReturnCopies` gives the copies back instead of
  running the op again. Nothing is recomputed for it, and no random number
  is drawn again.
- A block's input (a carried stream). Non-reentrant checkpoint saves its
  inputs through the saved-tensor hooks active around it, so `pack_inputs`
  there packs the ones the plan offloads, and checkpoint unpacks them for
  its re-run.
- Anything of a block that is not checkpointed (it saves every op): plain
  autograd saves through `saved_tensors_hooks`, so `_MarkOutputs` notes the
  offloaded ops' outputs and the hooks pack those (and offloaded inputs).
  Tensors saved twice are copied once.

A block's copies reach into its neighbours' time (docs/memory_model.md,
"Offload", copy windows). The plan names, on each block, its
`spill_trigger`: its own copies to the host wait until that op, where on
CUDA compute first waits for the block before's; and its `lead_trigger`:
a gradient pre-hook on that op's node, registered in the first forward,
brings back what of the block's own copies is not back yet and, when the
block before has `lead`, every copy of that block (`Triggers`,
`BlockCopies`). It fires after the block's re-run, as the gradient
reaches that op; the re-run's own nodes are never run.

On CPU the host copies live in NumPy buffers, outside PyTorch's CPU
allocator, so measure_peak's allocation record (the "device") does not see
them; on CUDA in pinned memory, copied out on a side stream, and back on
the compute stream, which waits for them there.
"""

from __future__ import annotations

import contextlib
import weakref
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Set, Tuple

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from .errors import SacplanError
from .host_copies import HostCopy, HostPool, _Arriving
from .naming import is_named
from .storage import storage_key, tensors_of


class PendingCall:
    """The call the policy just chose to offload, for the mode under the
    selective checkpoint's to claim: that mode runs each call right after
    the policy has seen it."""

    def __init__(self) -> None:
        self.func = None
        self.op_id: Optional[str] = None

    def set(self, func, op_id: str) -> None:
        self.func, self.op_id = func, op_id

    def claim(self, func) -> Optional[str]:
        if self.func is not func:
            return None
        op_id = self.op_id
        self.func, self.op_id = None, None
        return op_id


def _check_copyable(op_id: str, func) -> None:
    if any(ret.alias_info is not None for ret in func._schema.returns):
        raise SacplanError(
            f"plan: offload names op '{op_id}' ({func}), whose output is a view of or "
            "writes to its input; offload a fresh output (save or recompute this op)")


class _CopyOutputs(TorchDispatchMode):
    def __init__(self, pending: PendingCall, pool: HostPool, copies: "_Stash",
                 block_copies: "BlockCopies"):
        super().__init__()
        self.pending, self.pool, self.copies = pending, pool, copies
        self.block_copies = block_copies

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        op_id = self.pending.claim(func)
        if op_id is not None:
            _check_copyable(op_id, func)
            self.copies.add(op_id, tree_map(
                lambda x: (self.pool.store(x, self.block_copies.deferred())
                           if isinstance(x, torch.Tensor) else x), out))
        return out


class _Stash:
    """One checkpointed call's offloaded outputs, per op id in call order."""

    __slots__ = ("by_op", "order", "__weakref__")

    def __init__(self) -> None:
        self.by_op: Dict[str, Deque[Any]] = {}
        self.order: List[Tuple[str, int]] = []

    def add(self, op_id: str, stored: Any) -> None:
        entries = self.by_op.setdefault(op_id, deque())
        self.order.append((op_id, len(entries)))
        entries.append(stored)

    def bring_back(self) -> None:
        """Every copy back to the device, in the order the re-run needs
        them, as it starts (docs/memory_model.md, "Offload"): on CUDA on
        a side stream, each waited for where its op would have run."""
        for op_id, k in self.order:
            entries = self.by_op[op_id]
            entries[k] = tree_map(
                lambda x: x.to_device_async() if isinstance(x, HostCopy) else x, entries[k])


class _ReturnCopies(TorchDispatchMode):
    def __init__(self, pending: PendingCall, copies: _Stash):
        super().__init__()
        self.pending, self.copies = pending, copies

    def __enter__(self):
        self.copies.bring_back()
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        op_id = self.pending.claim(func)
        if op_id is None:
            return func(*args, **(kwargs or {}))
        stored = self.copies.by_op[op_id].popleft()
        return tree_map(lambda x: x.wait() if isinstance(x, _Arriving) else x, stored)


@contextlib.contextmanager
def _under(lower, upper):
    """`upper` (selective checkpoint's mode) sees each call first."""
    with lower, upper:
        yield


def checkpoint_contexts(sac_contexts: Tuple[Any, Any], pending: PendingCall, pool: HostPool,
                        block_copies: "BlockCopies", triggers: "Triggers") -> Tuple[Any, Any]:
    """The forward and re-run contexts of one checkpointed call: selective
    checkpoint's, over the modes that copy the offloaded ops' outputs out
    (their copies noted in `block_copies`) and act at the copy triggers
    of the block before, and give the copies back in the re-run."""
    copies = _Stash()
    block_copies.stash = weakref.ref(copies)
    forward, rerun = sac_contexts
    return (_under(_under(_CopyOutputs(pending, pool, copies, block_copies),
                          _ActAtTriggers(triggers)), forward),
            _under(_ReturnCopies(pending, copies), rerun))


def trigger_contexts(sac_contexts: Tuple[Any, Any], triggers: Triggers) -> Tuple[Any, Any]:
    """A checkpointed call that offloads nothing itself: selective
    checkpoint's forward over the mode acting at the block before's
    triggers."""
    forward, rerun = sac_contexts
    return _under(_ActAtTriggers(triggers), forward), rerun


class _Packed:
    """What autograd holds for an offloaded saved tensor: the host copy of
    its whole storage, shared by every view of it autograd saved, and,
    once a backward has read one, the storage rebuilt on the device, freed
    with the last node that saved a view of it. `arriving`: the copy back,
    when the block after's lead trigger issued it."""

    __slots__ = ("copy", "device_bytes", "arriving", "__weakref__")

    def __init__(self, copy: HostCopy) -> None:
        self.copy = copy
        self.device_bytes: Optional[torch.Tensor] = None
        self.arriving: Optional[_Arriving] = None

    def bring_back(self) -> None:
        if self.device_bytes is None and self.arriving is None:
            self.arriving = self.copy.to_device_async()


class _PackedView:
    __slots__ = ("packed", "dtype", "shape", "stride", "offset")

    def __init__(self, packed: _Packed, t: torch.Tensor) -> None:
        self.packed = packed
        self.dtype, self.shape, self.stride, self.offset = (
            t.dtype, t.shape, t.stride(), t.storage_offset())


def _storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """The whole storage under `t`, as a flat uint8 tensor."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def _unpack(packed):
    if not isinstance(packed, _PackedView):
        return packed
    shared = packed.packed
    if shared.device_bytes is None:
        arriving, shared.arriving = shared.arriving, None
        shared.device_bytes = arriving.wait() if arriving is not None else shared.copy.to_device()
    view = torch.empty(0, dtype=packed.dtype, device=shared.device_bytes.device)
    return view.set_(shared.device_bytes.untyped_storage(), packed.offset, packed.shape,
                     packed.stride)


class SavedOffload:
    """Saved-tensor hooks for one forward of a block: tensors whose storage
    was marked (`mark`) are packed to the host, each storage once. Storages,
    not tensors, are remembered: code often keeps only a view of an
    output, or saves several."""

    def __init__(self, pool: HostPool, inputs: List[torch.Tensor],
                 block_copies: "BlockCopies") -> None:
        self.pool = pool
        self.offloaded: Dict[Any, StorageWeakRef] = {}
        self._packed: Dict[Any, _Packed] = {}
        self.block_copies = block_copies
        for t in inputs:
            self.mark(t)

    def mark(self, t: torch.Tensor) -> None:
        key = storage_key(t)
        if key is not None:
            self.offloaded[key] = StorageWeakRef(t.untyped_storage())
            # A storage packed before at this address is gone.
            self._packed.pop(key, None)

    def _pack(self, t: torch.Tensor):
        key = storage_key(t)
        owner = self.offloaded.get(key) if key is not None else None
        # An expired storage was freed, and its address reused.
        if owner is None or owner.expired():
            return t
        if key not in self._packed:
            with torch.no_grad():
                self._packed[key] = _Packed(
                    self.pool.store(_storage_bytes(t), self.block_copies.deferred()))
            self.block_copies.packed.append(weakref.ref(self._packed[key]))
        return _PackedView(self._packed[key], t)

    @contextlib.contextmanager
    def hooks(self):
        try:
            with torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack):
                yield
        finally:
            # Autograd holds what it packed; these would keep it longer.
            self.offloaded.clear()
            self._packed.clear()


class _MarkOutputs(TorchDispatchMode):
    """Names a block's calls (`name`), marks the outputs of the ones the
    plan offloads and acts at the block before's copy triggers; `seen`
    gets every op id named."""

    def __init__(self, name: Callable[[Any], str], offload_ops: Set[str], saved: SavedOffload,
                 seen: Set[str], triggers: "Triggers"):
        super().__init__()
        self.name, self.offload_ops, self.saved, self.seen = name, offload_ops, saved, seen
        self.triggers = triggers

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.triggers.resolve()
        if not is_named(func):
            return func(*args, **kwargs)
        op_id = self.name(func)
        self.seen.add(op_id)
        self.triggers.before(op_id)
        out = func(*args, **kwargs)
        self.triggers.after(op_id, out)
        if op_id in self.offload_ops:
            _check_copyable(op_id, func)
            for x in tensors_of(out):
                self.saved.mark(x)
        return out


@contextlib.contextmanager
def plain_offload(name: Callable[[Any], str], offload_ops: Set[str], inputs: List[torch.Tensor],
                  pool: HostPool, seen: Set[str], block_copies: "BlockCopies",
                  triggers: "Triggers"):
    """The context for a forward of a block autograd runs plainly: offloads
    `inputs` and the outputs of `offload_ops` where autograd saves them
    (noted in `block_copies`), and acts at the block before's triggers."""
    saved = SavedOffload(pool, inputs, block_copies)
    with saved.hooks(), _MarkOutputs(name, offload_ops, saved, seen, triggers):
        yield
    triggers.resolve()


def input_offload(inputs: List[torch.Tensor], pool: HostPool, block_copies: "BlockCopies"):
    """Saved-tensor hooks around a checkpointed call: packs the inputs named
    when checkpoint saves them for its re-run (noted in `block_copies`)."""
    return SavedOffload(pool, inputs, block_copies).hooks()


class BlockCopies:
    """What one forward of a block sends to the host, for its own spill
    trigger and the block after's triggers: weakly, as autograd (and
    checkpoint's frame) own the copies. Until the block's spill trigger
    (`defer`), its copies to the host wait in `deferred`, holding their
    tensors on the device, as the engine is the block before's until then.
    `copied` (CUDA): an event after the last copy to the host was issued.
    `plain`: the block ran under plain autograd."""

    def __init__(self, plain: bool, defer: bool) -> None:
        self.plain = plain
        self.packed: List["weakref.ref[_Packed]"] = []
        self.stash: Optional["weakref.ref[_Stash]"] = None
        self._deferred: List[HostCopy] = []
        self._deferring = defer
        self.copied = None

    def deferred(self) -> Optional[List[HostCopy]]:
        """Where a copy to the host waits, or None to issue it now."""
        return self._deferred if self._deferring else None

    def flush(self) -> None:
        """Issues the copies deferred so far; later ones go at once."""
        self._deferring = False
        for copy in self._deferred:
            copy.issue()
        self._deferred.clear()

    def finish_forward(self, pool: HostPool) -> None:
        self.flush()
        self.copied = pool.copies_issued()

    def wait_copied(self) -> None:
        """Compute waits for every copy to the host this forward issued."""
        if self.copied is not None:
            torch.cuda.current_stream().wait_event(self.copied)

    def bring_back(self) -> None:
        """Issues every copy back, in the order the block's backward needs
        them: checkpointed, the saved inputs (unpacked as its re-run
        starts), then the ops' outputs in call order; plain, what autograd
        saved last first."""
        for ref in reversed(self.packed) if self.plain else self.packed:
            packed = ref()
            if packed is not None:
                packed.bring_back()
        stash = self.stash() if self.stash is not None else None
        if stash is not None:
            stash.bring_back()


class Triggers:
    """A block's copy triggers in its forward (docs/memory_model.md,
    "Offload"): before the spill trigger op, compute waits for the block
    before's copies to the host (`block_before`, CUDA) and the block's own
    deferred copies go (`own`); a pre-hook on the lead trigger op's
    autograd node brings back what of the block's own copies is not back
    yet (their deadline) and, with `block_before_leads`, the block
    before's copies. The node exists once autograd has wrapped the op's
    output, which a dispatch mode below autograd sees only at its next
    call or after the forward (`resolve`). `fired`: the triggers this
    forward reached, "spill" and "lead"."""

    def __init__(self, spill_op: str, lead_op: str, own: BlockCopies,
                 block_before: Optional[BlockCopies], block_before_leads: bool) -> None:
        self.spill_op, self.lead_op, self.own = spill_op, lead_op, own
        self.block_before, self.block_before_leads = block_before, block_before_leads
        self.fired: Set[str] = set()
        # Set by a checkpointed block's policy for _ActAtTriggers.
        self.pending = PendingCall()
        self._output = None

    def named(self, func, op_id: str) -> None:
        """The policy's note of a call it named in the first forward."""
        if op_id == self.spill_op or op_id == self.lead_op:
            self.pending.set(func, op_id)

    def before(self, op_id: str) -> None:
        if op_id == self.spill_op and "spill" not in self.fired:
            self.fired.add("spill")
            if self.block_before is not None:
                self.block_before.wait_copied()
            self.own.flush()

    def after(self, op_id: str, out) -> None:
        if op_id == self.lead_op and "lead" not in self.fired:
            self.fired.add("lead")
            self._output = out

    def resolve(self) -> None:
        if self._output is None:
            return
        out, self._output = self._output, None
        node = next((t.grad_fn for t in tensors_of(out) if t.grad_fn is not None), None)
        if node is None:
            return
        own = self.own
        block_before = self.block_before if self.block_before_leads else None

        def bring_back(grad_outputs):
            own.bring_back()
            if block_before is not None:
                block_before.bring_back()

        node.register_prehook(bring_back)


class _ActAtTriggers(TorchDispatchMode):
    """Under selective checkpointing's forward mode: acts at the triggers
    of the call its policy just named (`triggers.pending`)."""

    def __init__(self, triggers: Triggers):
        super().__init__()
        self.triggers = triggers

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.triggers.resolve()
        op_id = self.triggers.pending.claim(func)
        if op_id is not None:
            self.triggers.before(op_id)
        out = func(*args, **(kwargs or {}))
        if op_id is not None:
            self.triggers.after(op_id, out)
        return out

"""The dispatch tracer: a TorchDispatchMode that sees every aten call
below autograd while a block's forward runs. A call that returns new storage
is an op; views and other aliases are not (they own no memory), in-place
calls make a new version of the tensor they write. Block hooks start and end
each block's trace; autograd_walk then reads the nodes the forward built."""

from __future__ import annotations

import inspect
from typing import List, Optional, Tuple

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from .autograd_walk import held_before_blocks, record_saved, walk_block_nodes
from .backward_timing import BackwardTimer
from .clock import Clock
from .errors import SacplanError
from .graph import OpRecord, TensorRecord, dtype_name, op_kind
from . import sync_ops
from .memory import AllocationLog
from .naming import (OpNamer, aten_name, autocast_cast_dtypes, autocast_dtype_of,
                     is_autocast_cached, is_collective, is_named, is_random)
from .boundary import Parts, byte_range, named_tensors
from .storage import fresh_outputs, output_id, storage_key, tensors_of, written_args
from .trace import BlockTrace


def _refuse_cache(index: int, name: str, named) -> None:
    """A key/value cache (transformers' DynamicCache) holds every block's
    keys and values for the whole step, and a checkpoint's re-run appends to
    it again: memory no plan can count. Training runs without one."""
    for arg_name, value in named:
        if type(value).__name__.endswith("Cache") and hasattr(value, "update"):
            raise SacplanError(
                f"blocks[{index}] ({name}) gets a key/value cache ({arg_name}: "
                f"{type(value).__name__}), which holds every block's keys and values for the "
                "step and grows on each checkpoint re-run; train without it (transformers: "
                "pass use_cache=False in the step, as it does under gradient checkpointing)")


class Tracer(TorchDispatchMode):
    """Names and records the aten calls of the blocks; installs the block
    hooks that start and end each block's trace."""

    def __init__(self, blocks: List[Tuple[str, nn.Module]], resident: set,
                 clock: Clock, structure: bool, log: Optional[AllocationLog] = None):
        super().__init__()
        self.blocks = blocks
        self.resident = resident
        self.clock = clock
        self.structure = structure
        self.log = log
        self.current: Optional[BlockTrace] = None
        self.marking = False
        self.traces: List[Optional[BlockTrace]] = [None] * len(blocks)
        self.timer = BackwardTimer(clock, self._mark)
        # Storage made during the step outside the blocks, and what the
        # graph before block 0 keeps of it (the embeddings' saved tensors).
        self.made_outside: set = set()
        self.embedding_saved_bytes = 0
        # Low-precision casts of weights before block 0, as (storage,
        # device type, dtype, bytes): those autocast caches and the
        # embeddings' backward does not keep (embedding_cast_bytes, read at
        # block 0's pre-hook, where autocast's state can be read) live until
        # the step's autocast region ends.
        self._early_casts: List[Tuple[object, str, torch.dtype, int]] = []
        self.embedding_cast_bytes = 0
        self.namers = [OpNamer(module) for _, module in blocks]
        self.handles = []
        for i, (_, module) in enumerate(blocks):
            self.handles.append(module.register_forward_pre_hook(self._pre(i), with_kwargs=True))
            self.handles.append(module.register_forward_hook(self._post(i), with_kwargs=True))

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        for namer in self.namers:
            namer.remove()

    def _mark(self, label: str) -> None:
        # The mark's own allocation must not become an op of the block.
        if self.log is not None:
            self.marking = True
            try:
                self.log.mark(label)
            finally:
                self.marking = False

    # Block boundaries ------------------------------------------------------
    def _pre(self, i: int):
        def hook(module, args, kwargs):
            name = self.blocks[i][0]
            if self.traces[i] is not None:
                raise SacplanError(f"blocks[{i}] ({name}) runs more than once in a step")
            if i > 0 and self.traces[i - 1] is None:
                raise SacplanError(
                    f"blocks[{i}] ({name}) runs before blocks[{i - 1}] "
                    f"({self.blocks[i - 1][0]}) has run: give the blocks in the order the "
                    "forward runs them, each once a step")
            self._mark(f"fwd_start{i}")
            trace = BlockTrace(i, name)
            try:
                bound = inspect.signature(module.forward).bind(*args, **kwargs)
                named = list(bound.arguments.items())
            except TypeError:
                named = [(f"arg{k}", a) for k, a in enumerate(args)] + list(kwargs.items())
            leaves = [(path, t) for arg_name, value in named
                      for path, t in named_tensors(arg_name, value)
                      if (key := storage_key(t)) is not None and key not in self.resident]
            parts = Parts([t for _, t in leaves])
            for arg_name, value in leaves:
                key, part = storage_key(value), parts.key_of(value)
                if part in trace.input_keys:
                    continue
                trace.input_ids.setdefault(key, arg_name)
                if parts.split(key):
                    trace.input_parts.setdefault(key, []).append(
                        (byte_range(value), arg_name))
                    trace.input_parts[key].sort()
                trace.input_keys.append(part)
                # "shared" until streams.resolve_streams has seen which
                # inputs the block before made.
                trace.inputs.append({
                    "id": arg_name, "bytes": parts.bytes_of(part),
                    "shape": list(value.shape), "dtype": dtype_name(value.dtype),
                    "requires_grad": bool(value.requires_grad), "kind": "shared"})
            if not trace.inputs:
                raise SacplanError(f"blocks[{i}] ({name}) takes no tensor input")
            _refuse_cache(i, name, named)
            trace.param_keys = {storage_key(p) for p in module.parameters()} - {None}
            trace.autocast_dtypes = autocast_cast_dtypes(
                {"cpu"} | {t.device.type for _, t in leaves})
            trace.autocast_dtype = autocast_dtype_of(leaves[0][1].device.type)
            self.namers[i].reset()
            trace.seq_start = trace.last_seq = torch._C._autograd._get_sequence_nr()
            if i == 0 and self.structure:
                self.embedding_saved_bytes, saved = held_before_blocks(
                    [t for _, t in leaves], set(trace.input_ids),
                    self.resident, self.made_outside)
                self.embedding_cast_bytes = sum(
                    nbytes for key, device, dtype, nbytes in self._early_casts
                    if trace.autocast_dtypes.get(device) == dtype and key not in saved)
            self.traces[i] = trace
            self.current = trace
        return hook

    def _post(self, i: int):
        def hook(module, args, kwargs, output):
            trace = self.current
            self.current = None
            outs = [t for t in tensors_of(output) if storage_key(t) is not None]
            if not outs:
                raise SacplanError(f"blocks[{i}] ({trace.name}) returns no tensor")
            parts = Parts(outs)
            for position, out in enumerate(outs):
                if not trace.made_by_op(storage_key(out)):
                    raise SacplanError(
                        f"blocks[{i}] ({trace.name}): output {position} is not made by an "
                        "op of the block (a block must compute each tensor it returns, "
                        "e.g. end each stream with a residual add)")
                part = parts.key_of(out)
                if part not in trace.output_keys:
                    trace.output_keys.append(part)
            self._walk_nodes(trace, outs)
            for key in {storage_key(out) for out in outs if parts.split(storage_key(out))}:
                views = {parts.key_of(out): out for out in outs if storage_key(out) == key}
                trace.split_output(key, [(part, parts.bytes_of(part), views[part])
                                         for part in sorted(views, key=lambda p: p[1:])])
            self._mark(f"fwd_end{i}")
        return hook

    @property
    def backward_started(self) -> bool:
        return self.timer.started

    def _walk_nodes(self, trace: BlockTrace, outs: List[torch.Tensor]) -> None:
        def visit(node, op_index: Optional[int]) -> None:
            if self.structure:
                record_saved(trace, node, op_index, self.resident)
            if op_index is not None:
                self.timer.hook(trace, node, trace.ops[op_index].id)

        walk_block_nodes(trace, outs, visit)

    # Aten calls ------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        trace = self.current
        if trace is None or self.marking or not is_named(func):
            out = func(*args, **kwargs)
            if trace is None and self.structure and not self.backward_started:
                self.made_outside.update(storage_key(t) for t in tensors_of(out))
                if self.traces[0] is None and isinstance(out, torch.Tensor) and \
                        is_autocast_cached(func, args, out, {out.device.type: out.dtype}):
                    self._early_casts.append((storage_key(out), out.device.type, out.dtype,
                                              out.untyped_storage().nbytes()))
            return out
        op_id = self.namers[trace.index].name(func)
        seq = torch._C._autograd._get_sequence_nr()
        node_seq = seq - 1 if seq != trace.last_seq else None
        trace.last_seq = seq
        self._mark(f"{trace.index}:fwd:{op_id}:begin")
        begin = self.clock.start()
        out = func(*args, **kwargs)
        span = self.clock.stop(begin)
        self._mark(f"{trace.index}:fwd:{op_id}:end")
        self._record_op(trace, func, op_id, node_seq, span, args, kwargs, out)
        return out

    def _record_op(self, trace, func, op_id, node_seq, span, args, kwargs, out) -> None:
        ins = tensors_of((args, kwargs))
        in_keys = {storage_key(t) for t in ins}
        written = {storage_key(t) for t in written_args(func, args, kwargs)}
        fresh = fresh_outputs(out, in_keys, written, self.resident, trace.param_keys)
        # A syncing call that makes no op (.item() returns a number) makes
        # the host wait where it is issued: after the op issued last.
        syncs = sync_ops.syncs(func, args, kwargs, out)
        if not fresh:
            if node_seq is not None:
                trace.op_of_node[node_seq] = None
            if syncs and trace.ops:
                trace.ops[-1].syncs = True
            return
        # An autograd-aware collective (all_to_all_single_autograd) runs
        # inside its autograd Function's forward, where grad mode is off;
        # its output is differentiable all the same.
        grad_in = ((torch.is_grad_enabled() or is_collective(func))
                   and any(t.requires_grad for t in ins))
        op = OpRecord(id=op_id, aten=aten_name(func), kind=op_kind(aten_name(func)),
                      inputs=[], outputs=[], collective=is_collective(func),
                      random=is_random(func, args, kwargs),
                      autocast_cached=is_autocast_cached(func, args, out,
                                                         trace.autocast_dtypes),
                      syncs=syncs)
        op_index = len(trace.ops)
        for t in ins:
            key = storage_key(t)
            if key is None:
                continue
            if key in self.resident or key in trace.param_keys:
                if t.requires_grad and grad_in:
                    # The op whose backward runs first (the last reader)
                    # allocates the parameter's gradient: under FSDP2 the
                    # unsharded gradient, freed after the reduce-scatter.
                    # A read under no_grad (a frozen path) makes none.
                    trace.last_reader[key] = (op_index, t.untyped_storage().nbytes())
                continue
            for tensor_id in trace.ids_of(t):
                # A part of a split storage is read whole: slices are
                # measured against a whole storage (OpRecord.read).
                op.read(tensor_id, t if key not in trace.input_parts else None)
        for key in written:
            # A cached output must not change after it is cached (SAC checks
            # the version): neither the call that writes a tensor in place
            # nor the op that made it may be saved.
            earlier = trace.op_at.get(trace.id_of(key) or "")
            if earlier is not None:
                trace.ops[earlier].never_save = True
                op.never_save = True
        for j, (key, o) in enumerate(fresh):
            tensor_id = output_id(op_id, j)
            op.outputs.append(TensorRecord(
                id=tensor_id, bytes=o.untyped_storage().nbytes(), shape=list(o.shape),
                dtype=dtype_name(o.dtype),
                requires_grad=bool(grad_in and (o.is_floating_point() or o.is_complex()))))
            trace.made(key, tensor_id, o)
            trace.op_at[tensor_id] = op_index
        trace.fwd_spans[op_id].append(span)
        trace.ops.append(op)
        if node_seq is not None:
            trace.op_of_node[node_seq] = op_index

"""capture(): one real training step of a PyTorch model -> profile.json.

How it reads the model (see docs/python.md for the whole story):
- A TorchDispatchMode sees every aten call below autograd while a block's
  forward runs. A call that returns new storage is an op; views and other
  aliases are not (they own no memory), in-place calls make a new version of
  the tensor they write. Tensors are identified by storage, so a view of an
  op's output counts as that output.
- Autograd creates one node per differentiable call, numbered in creation
  order; the node of a call exists when the call reaches the dispatch mode,
  so the sequence number tells which op each node belongs to. After the
  block's forward the nodes' saved tensors (`_saved_*`, what autograd really
  keeps) are mapped by storage to the op that made them, to a block input,
  or to a parameter (resident anyway, not counted).
- Node hooks time each op's backward; the dispatch mode times its forward.
- An allocation log of the whole step measures what runs outside the
  blocks: the embeddings' saved tensors, the head and loss, the optimizer.
"""

from __future__ import annotations

import inspect
import json
import os
import statistics
import tempfile
import time
from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from . import distributed
from .blocks import BlockSpec, find_blocks
from .errors import SacplanError
from .graph import BlockRecord, OpRecord, TensorRecord, dtype_name, op_kind
from .memory import (AllocationLog, _sync, _unique_storage_bytes, check_loss,
                     optimizer_state_tensors)
from .naming import OpNamer, aten_name, is_collective, is_named, is_random
from .plan import PROFILE_SCHEMA, model_fingerprint

StorageKey = Tuple[str, int]


def _key(t: torch.Tensor) -> Optional[StorageKey]:
    t = distributed.local(t)
    if t.device.type == "meta":
        return None
    try:
        storage = t.untyped_storage()
        if storage.data_ptr() == 0 or storage.nbytes() == 0:
            return None
    except RuntimeError:
        return None  # a wrapper subclass without storage of its own
    return (str(t.device), storage.data_ptr())


def _tensors(tree) -> List[torch.Tensor]:
    leaves, _ = tree_flatten(tree)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def _written_args(func, args, kwargs) -> List[torch.Tensor]:
    """The tensor arguments an in-place or out= call writes."""
    written = []
    schema = func._schema
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = args[i] if i < len(args) else kwargs.get(arg.name)
        written += _tensors(value)
    return written


def _saved_tensors(node) -> List[torch.Tensor]:
    """What an autograd node keeps for its backward."""
    found = []
    for attr in dir(node):
        if not attr.startswith("_saved_"):
            continue
        try:
            value = getattr(node, attr)
        except RuntimeError:  # freed already, or not accessible
            continue
        found += _tensors(value)
    if not found and hasattr(node, "saved_tensors"):
        try:
            found += _tensors(node.saved_tensors)
        except RuntimeError:
            pass
    return found


class _Clock:
    """Times spans on the device: wall clock on CPU, CUDA events on GPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def start(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def stop(self, begin):
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            return (begin, end)
        return (time.perf_counter() - begin) * 1e3

    def ms(self, span) -> float:
        if self.cuda:
            begin, end = span
            return begin.elapsed_time(end)
        return span


class _BlockTrace:
    """One block's forward in one step."""

    def __init__(self, index: int, name: str):
        self.index = index
        self.name = name
        self.inputs: List[dict] = []
        self.input_ids: Dict[StorageKey, str] = {}
        self.tensor_of: Dict[StorageKey, str] = {}
        self.ops: List[OpRecord] = []
        self.op_at: Dict[str, int] = {}      # tensor id -> producing op index
        self.op_of_node: Dict[int, Optional[int]] = {}  # node sequence nr -> op index
        self.last_reader: Dict[StorageKey, Tuple[int, int]] = {}  # param -> (op, bytes)
        # The block's parameters as its forward sees them: under FSDP2 the
        # unsharded parameters it all-gathered, which are not resident.
        self.param_keys: set = set()
        self.seq_start = 0
        self.last_seq = 0
        self.output: Optional[str] = None
        self.fwd_spans: Dict[str, list] = defaultdict(list)
        self.bwd_spans: Dict[str, list] = defaultdict(list)


class _Tracer(TorchDispatchMode):
    """Names and records the aten calls of the blocks; installs the block
    hooks that start and end each block's trace."""

    def __init__(self, blocks: List[Tuple[str, nn.Module]], resident: set,
                 clock: _Clock, structure: bool, log: Optional[AllocationLog] = None):
        super().__init__()
        self.blocks = blocks
        self.resident = resident
        self.clock = clock
        self.structure = structure
        self.log = log
        self.current: Optional[_BlockTrace] = None
        self.marking = False
        self.traces: List[Optional[_BlockTrace]] = [None] * len(blocks)
        self.backward_started = False
        # Storage made during the step outside the blocks, and what the
        # graph before block 0 keeps of it (the embeddings' saved tensors).
        self.made_outside: set = set()
        self.embedding_saved_bytes = 0
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
            self._mark(f"fwd_start{i}")
            trace = _BlockTrace(i, name)
            try:
                bound = inspect.signature(module.forward).bind(*args, **kwargs)
                named = list(bound.arguments.items())
            except TypeError:
                named = [(f"arg{k}", a) for k, a in enumerate(args)] + list(kwargs.items())
            first = True
            for arg_name, value in named:
                if not isinstance(value, torch.Tensor):
                    continue
                key = _key(value)
                if key is None or key in trace.input_ids or key in self.resident:
                    continue
                trace.input_ids[key] = arg_name
                trace.inputs.append({
                    "id": arg_name, "bytes": value.untyped_storage().nbytes(),
                    "shape": list(value.shape), "dtype": dtype_name(value.dtype),
                    "requires_grad": bool(value.requires_grad),
                    "kind": "carried" if first else "shared"})
                first = False
            if first:
                raise SacplanError(f"blocks[{i}] ({name}) takes no tensor input")
            trace.param_keys = {_key(p) for p in module.parameters()} - {None}
            self.namers[i].reset()
            trace.seq_start = trace.last_seq = torch._C._autograd._get_sequence_nr()
            if i == 0 and self.structure:
                self.embedding_saved_bytes = self._held_before_blocks(
                    [v for _, v in named if isinstance(v, torch.Tensor)], set(trace.input_ids))
            self.traces[i] = trace
            self.current = trace
        return hook

    def _post(self, i: int):
        def hook(module, args, kwargs, output):
            trace = self.current
            self.current = None
            outs = [t for t in _tensors(output) if _key(t) is not None]
            if not outs:
                raise SacplanError(f"blocks[{i}] ({trace.name}) returns no tensor")
            key = _key(outs[0])
            if key not in trace.tensor_of:
                raise SacplanError(
                    f"blocks[{i}] ({trace.name}): the output is not made by an op of the "
                    "block (a block must compute its output, e.g. end with a residual add)")
            trace.output = trace.tensor_of[key]
            self._walk_nodes(trace, outs)
            self._mark(f"fwd_end{i}")
        return hook

    # Autograd graph --------------------------------------------------------
    def _held_before_blocks(self, inputs: List[torch.Tensor], input_keys: set) -> int:
        """Bytes the autograd graph behind block 0's inputs keeps for its
        backward, counting only storage the step itself made: held from
        here until the embeddings' backward, after every block's."""
        stack = [t.grad_fn for t in inputs if t.grad_fn is not None]
        seen, counted, total = set(), set(), 0
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            for saved in _saved_tensors(node):
                key = _key(saved)
                if (key is None or key in counted or key in input_keys
                        or key in self.resident or key not in self.made_outside):
                    continue
                counted.add(key)
                total += saved.untyped_storage().nbytes()
            stack.extend(fn for fn, _ in node.next_functions)
        return total

    def _walk_nodes(self, trace: _BlockTrace, outs: List[torch.Tensor]) -> None:
        end_seq = torch._C._autograd._get_sequence_nr()
        stack = [t.grad_fn for t in outs if t.grad_fn is not None]
        seen = set()
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            seq = node._sequence_nr()
            if seq < trace.seq_start or seq >= end_seq:
                continue
            op_index = trace.op_of_node.get(seq)
            if self.structure:
                self._record_saved(trace, node, op_index)
            if op_index is not None:
                self._time_backward(trace, node, trace.ops[op_index].id)
            stack.extend(fn for fn, _ in node.next_functions)

    def _record_saved(self, trace: _BlockTrace, node, op_index: Optional[int]) -> None:
        for saved in _saved_tensors(node):
            key = _key(saved)
            if key is None or key in self.resident or key in trace.param_keys:
                continue
            tensor_id = trace.tensor_of.get(key) or trace.input_ids.get(key)
            if tensor_id is None:
                continue  # made outside the block and not passed in: not the block's
            producer = trace.op_at.get(tensor_id)
            if op_index is None:
                # A node no op owns (a view's): its producer keeps it.
                if producer is not None:
                    trace.ops[producer].need(tensor_id)
                continue
            op = trace.ops[op_index]
            if tensor_id in op.inputs or any(o.id == tensor_id for o in op.outputs):
                op.need(tensor_id)
            elif producer is None or producer < op_index:
                # Kept by a node for a tensor the call did not take as an
                # argument (a custom Function's ctx): the op reads it.
                op.read(tensor_id)
                op.need(tensor_id)
            else:
                trace.ops[producer].need(tensor_id)

    def _time_backward(self, trace: _BlockTrace, node, op_id: str) -> None:
        state = {}

        def pre(grad_outputs):
            if not self.backward_started:
                self.backward_started = True
                self._mark("bwd_start")
            self._mark(f"{trace.index}:bwd:{op_id}:begin")
            state["t"] = self.clock.start()

        def post(grad_inputs, grad_outputs):
            if "t" in state:
                trace.bwd_spans[op_id].append(self.clock.stop(state.pop("t")))
                self._mark(f"{trace.index}:bwd:{op_id}:end")

        node.register_prehook(pre)
        node.register_hook(post)

    # Aten calls ------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        trace = self.current
        if trace is None or self.marking or not is_named(func):
            out = func(*args, **kwargs)
            if trace is None and self.structure and not self.backward_started:
                self.made_outside.update(_key(t) for t in _tensors(out))
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
        ins = _tensors((args, kwargs))
        in_keys = {_key(t) for t in ins}
        written = {_key(t) for t in _written_args(func, args, kwargs)}
        fresh = []
        for o in _tensors(out):
            key = _key(o)
            if key is None or key in self.resident or key in trace.param_keys:
                continue
            if key in in_keys and key not in written:
                continue  # a view or alias of an input: no new memory
            fresh.append((key, o))
        if not fresh:
            if node_seq is not None:
                trace.op_of_node[node_seq] = None
            return
        # An autograd-aware collective (all_to_all_single_autograd) runs
        # inside its autograd Function's forward, where grad mode is off;
        # its output is differentiable all the same.
        grad_in = ((torch.is_grad_enabled() or is_collective(func))
                   and any(t.requires_grad for t in ins))
        op = OpRecord(id=op_id, aten=aten_name(func), kind=op_kind(aten_name(func)),
                      inputs=[], outputs=[], collective=is_collective(func),
                      random=is_random(func, args, kwargs))
        op_index = len(trace.ops)
        for t in ins:
            key = _key(t)
            if key is None:
                continue
            if key in self.resident or key in trace.param_keys:
                if t.requires_grad:
                    # The op whose backward runs first (the last reader)
                    # allocates the parameter's gradient: under FSDP2 the
                    # unsharded gradient, freed after the reduce-scatter.
                    trace.last_reader[key] = (op_index, t.untyped_storage().nbytes())
                continue
            tensor_id = trace.tensor_of.get(key) or trace.input_ids.get(key)
            if tensor_id is not None:
                op.read(tensor_id, t)
        for key in written:
            # A cached output must not change after it is cached (SAC checks
            # the version): neither the call that writes a tensor in place
            # nor the op that made it may be saved.
            earlier = trace.op_at.get(trace.tensor_of.get(key, ""))
            if earlier is not None:
                trace.ops[earlier].never_save = True
                op.never_save = True
        for j, (key, o) in enumerate(fresh):
            tensor_id = f"{op_id}.out" if j == 0 else f"{op_id}.out{j}"
            op.outputs.append(TensorRecord(
                id=tensor_id, bytes=o.untyped_storage().nbytes(), shape=list(o.shape),
                dtype=dtype_name(o.dtype),
                requires_grad=bool(grad_in and (o.is_floating_point() or o.is_complex()))))
            trace.tensor_of[key] = tensor_id
            trace.op_at[tensor_id] = op_index
        trace.fwd_spans[op_id].append(span)
        trace.ops.append(op)
        if node_seq is not None:
            trace.op_of_node[node_seq] = op_index


def _as_step(step) -> Callable[[nn.Module], torch.Tensor]:
    if callable(step):
        return step
    if isinstance(step, dict):
        return lambda model: _as_loss(model(**step))
    if isinstance(step, (tuple, list)):
        return lambda model: _as_loss(model(*step))
    if isinstance(step, torch.Tensor):
        return lambda model: _as_loss(model(step))
    raise SacplanError("step must be a function model -> loss, or an example batch "
                       "(a tensor, a tuple of arguments or a dict of keyword arguments)")


def _as_loss(out) -> torch.Tensor:
    """An example batch's loss: the output itself when it is a scalar, else
    the mean square of the first output tensor (a stand-in objective whose
    backward touches every output element, as a real loss does)."""
    tensors = _tensors(out)
    if not tensors:
        raise SacplanError("the model returned no tensor")
    first = tensors[0]
    return first if first.dim() == 0 else first.float().square().mean()


def check_output_path(path) -> str:
    """The path as a str; SacplanError unless it can name a file to write."""
    if not isinstance(path, (str, os.PathLike)):
        raise SacplanError(f"path: expected a file name, not {type(path).__name__}")
    path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise SacplanError("path: expected a file name, got an empty one")
    if os.path.isdir(path):
        raise SacplanError(f"{path}: is a directory; name the profile file to write")
    return path


def write_json_atomically(doc: dict, path) -> None:
    """Writes to a temporary file beside `path`, then renames it over; on
    any failure no file is left (SacplanError for the OS's)."""
    path = check_output_path(path)
    tmp = None
    try:
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".sacplan-", suffix=".json", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise SacplanError(f"{path}: cannot write ({exc.strerror or exc})") from exc
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def _workspace(log: AllocationLog, block: int, op_id: str) -> Tuple[int, int]:
    """Scratch an op allocates and frees inside its forward and backward:
    the most live between its begin and end marks above what is live at
    the end of its forward (outputs included), or at either end of its
    backward (the gradients it hands on included)."""
    fwd_begin, fwd_end = f"{block}:fwd:{op_id}:begin", f"{block}:fwd:{op_id}:end"
    bwd_begin, bwd_end = f"{block}:bwd:{op_id}:begin", f"{block}:bwd:{op_id}:end"
    forward = max(0, log.peak(fwd_begin, fwd_end) - log.live(fwd_end))
    backward = 0
    if log.has(bwd_begin) and log.has(bwd_end):
        backward = max(0, log.peak(bwd_begin, bwd_end)
                       - max(log.live(bwd_begin), log.live(bwd_end)))
    return forward, backward


def _device_info(device: torch.device) -> dict:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {"name": props.name, "memory_bytes": int(props.total_memory)}
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = 0
    return {"name": "cpu", "memory_bytes": int(memory)}


class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.enabled = total, 0, enabled

    def advance(self, what: str) -> None:
        self.done += 1
        if self.enabled:
            width = 24
            filled = width * self.done // self.total
            import sys
            sys.stderr.write(f"\rcapture [{'#' * filled}{'.' * (width - filled)}] "
                             f"{self.done}/{self.total} steps ({what})   ")
            if self.done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def _add_samples(traces, clock: _Clock, fwd_samples, bwd_samples) -> None:
    """One step's forward and backward time per op, appended per block."""
    for i, trace in enumerate(traces):
        for op_id, spans in trace.fwd_spans.items():
            fwd_samples[i][op_id].append(sum(clock.ms(s) for s in spans))
        for op_id, spans in trace.bwd_spans.items():
            bwd_samples[i][op_id].append(sum(clock.ms(s) for s in spans))


def _fsdp_fields(block: nn.Module, name: str, world_size: int,
                 collectives: Optional[distributed.CollectiveSync], log: AllocationLog) -> dict:
    """A block's "fsdp" object: its buffer sizes, the median time of the
    all-gathers and reduce-scatters FSDP2 issued for it, and the scratch
    the collective itself allocates and frees while it runs (gloo copies
    through a temporary the size of the all-gather output; NCCL does not),
    the most over the step's calls, from the allocation record."""
    fields = distributed.fsdp_block_bytes(block, world_size)
    for kind in ("all_gather", "reduce_scatter"):
        spans = collectives.fsdp_ms.get((kind, name), []) if collectives else []
        fields[f"{kind}_ms"] = round(statistics.median(spans), 6) if spans else 0.0
        scratch = 0
        marks = log.collectives.fsdp_marks.get((kind, name), []) if log.collectives else []
        for begin, end in marks:
            scratch = max(scratch, log.peak(begin, end) - max(log.live(begin), log.live(end)))
        fields[f"{kind}_workspace_bytes"] = scratch
    return fields


def capture(model: nn.Module, step: Any, *, blocks: BlockSpec,
            optimizer: Optional[torch.optim.Optimizer] = None, path: Optional[str] = None,
            name: Optional[str] = None, warmup: int = 1, repeats: int = 3,
            progress: bool = False, sp: int = 1) -> dict:
    """Runs real training steps of `model` and returns (and with `path`,
    writes atomically) a `sacplan.profile/1` document for it.

    step: a function model -> scalar loss that runs one step's forward on a
      fixed batch, or an example batch (tensor, tuple of args, dict of
      kwargs) whose output's mean square is the loss.
    blocks: which submodules are the blocks (see find_blocks). Every block
      must run once per step; the first tensor argument of a block's forward
      is its carried input (the residual stream), the other tensor arguments
      are shared inputs named by their parameter names.
    optimizer: stepped after each backward (its state and step are part of
      the profile); None trains without one.
    warmup, repeats: untimed steps first, then `repeats` timed steps (times
      are medians). One more step records the graph and the allocations.
    sp: the sequence-parallel degree the blocks run at (their all-to-alls
      are ops of the block, captured like any other call).
    The model trains for warmup + 1 + 2 * repeats steps. Gradients are set to
    None after each step. Raises SacplanError for bad input; on error no file
    is written.

    Inside a torch.distributed process group, every rank calls capture and
    gets its own profile: every byte and time in it is this rank's. The
    profile's "parallel" object records the world size, sp and whether the
    blocks are FSDP2 `fully_shard` modules; under FSDP2 each block gets an
    "fsdp" object (buffer sizes, measured all-gather and reduce-scatter
    times). See docs/python.md, "Many ranks".
    """
    found = find_blocks(model, blocks)
    parallel = distributed.parallel_info(found, sp)
    params = list(model.parameters())
    if not any(p.requires_grad for p in params):
        raise SacplanError("model has no parameters that require gradients")
    for index, (block_name, module) in enumerate(found):
        if getattr(module, "_sacplan_applied_forward", False):
            raise SacplanError(f"blocks[{index}] ({block_name}) has a plan applied: capture "
                               "the model as it runs without checkpointing")
    if warmup < 0 or repeats < 1:
        raise SacplanError("warmup must be >= 0 and repeats >= 1")
    if path is not None:
        path = check_output_path(path)
    step_fn = _as_step(step)
    device = params[0].device
    clock = _Clock(device)
    resident = {_key(t) for t in params + list(model.buffers())} - {None}
    block_params = {_key(p) for _, module in found for p in module.parameters()}
    outside = [p for p in params if p.requires_grad and _key(p) not in block_params]
    bar = _Progress(warmup + 1 + 2 * repeats, progress)

    def loss_of(m):
        return check_loss(step_fn(m))

    def finish(loss):
        loss.backward()
        if optimizer is not None:
            optimizer.step()
        model.zero_grad(set_to_none=True)

    for _ in range(warmup):
        finish(loss_of(model))
        bar.advance("warm-up")

    # The recorded step: graph, saved tensors, allocations.
    log = AllocationLog(device)
    tracer = _Tracer(found, resident, clock, structure=True, log=log)
    head_grads: List[int] = []
    embedding_grads: List[int] = []
    grad_hooks = []
    for p in outside:
        nbytes = distributed.local(p).untyped_storage().nbytes()

        def arrived(_, nbytes=nbytes):
            (embedding_grads if tracer.backward_started else head_grads).append(nbytes)

        grad_hooks.append(p.register_post_accumulate_grad_hook(arrived))
    # Under FSDP2 the root's gradients are whole (unsharded) from their
    # module's backward until the root's reduce-scatter at the end of
    # backward; the hooks above only see the shards FSDP2 assigns after it.
    # A module outside the blocks that runs before block 0 is an embedding,
    # after it the head.
    root_grads = {"head": 0, "embedding": 0}
    fsdp = parallel is not None and parallel["fsdp"]
    if fsdp:
        in_blocks = {id(m) for _, block in found for m in block.modules()}
        for module in model.modules():
            if id(module) in in_blocks or not module._parameters:
                continue

            def ran(mod, args):
                side = "head" if tracer.traces[0] is not None else "embedding"
                root_grads[side] += sum(p.numel() * p.element_size()
                                        for p in mod._parameters.values()
                                        if p is not None and p.requires_grad)

            grad_hooks.append(module.register_forward_pre_hook(ran))
    try:
        with log:
            log.mark("start")
            with tracer:
                loss = loss_of(model)
            loss.backward()
            log.mark("bwd_end")
            if optimizer is not None:
                optimizer.step()
            log.mark("opt_end")
            model.zero_grad(set_to_none=True)
            del loss
    finally:
        tracer.remove()
        for handle in grad_hooks:
            handle.remove()
    traces = tracer.traces
    for i, trace in enumerate(traces):
        if trace is None:
            raise SacplanError(f"blocks[{i}] ({found[i][0]}) did not run during the step")
    bar.advance("graph")

    fwd_samples: List[Dict[str, list]] = [defaultdict(list) for _ in found]
    bwd_samples: List[Dict[str, list]] = [defaultdict(list) for _ in found]
    if log.collectives is None:
        # Inside a process group the recorded step waits after every
        # collective (AllocationLog): its times are not a step's.
        _add_samples(traces, clock, fwd_samples, bwd_samples)
    # Collectives complete before they return while timed, so an all-to-all
    # op's time is the exchange's, and FSDP2's all-gathers and
    # reduce-scatters are timed per block.
    collectives = distributed.CollectiveSync(settle=False) if distributed.active() else None
    for _ in range(repeats):
        timer = _Tracer(found, resident, clock, structure=False)
        try:
            if collectives is not None:
                collectives.__enter__()
            try:
                with timer:
                    loss = loss_of(model)
                finish(loss)
            finally:
                if collectives is not None:
                    collectives.__exit__(None, None, None)
            del loss
            _sync(device)
        finally:
            timer.remove()
        _add_samples(timer.traces, clock, fwd_samples, bwd_samples)
        bar.advance("op times")

    # Plain steps: the wall time of each phase and of each block's forward,
    # with no dispatch mode in the way.
    phase = defaultdict(list)
    block_wall = [[] for _ in found]
    for _ in range(repeats):
        starts = {}
        handles = []
        for i, (_, module) in enumerate(found):
            def pre(module, args, i=i):
                _sync(device)
                starts[i] = time.perf_counter()

            def post(module, args, output, i=i):
                _sync(device)
                block_wall[i].append((time.perf_counter() - starts[i]) * 1e3)

            handles.append(module.register_forward_pre_hook(pre))
            handles.append(module.register_forward_hook(post))
        try:
            _sync(device)
            t0 = time.perf_counter()
            loss = loss_of(model)
            _sync(device)
            t1 = time.perf_counter()
            loss.backward()
            _sync(device)
            t2 = time.perf_counter()
            if optimizer is not None:
                optimizer.step()
            _sync(device)
            t3 = time.perf_counter()
            model.zero_grad(set_to_none=True)
            del loss
        finally:
            for handle in handles:
                handle.remove()
        phase["forward"].append((t1 - t0) * 1e3)
        phase["backward"].append((t2 - t1) * 1e3)
        phase["optimizer"].append((t3 - t2) * 1e3)
        bar.advance("step times")

    records = []
    blocks_fwd_ms = 0.0
    blocks_bwd_ms = 0.0
    for i, trace in enumerate(traces):
        record = BlockRecord(index=i, name=trace.name, inputs=trace.inputs, ops=trace.ops,
                             output=trace.output)
        for op in trace.ops:
            op.fwd_ms = statistics.median(fwd_samples[i][op.id]) if fwd_samples[i][op.id] else 0.0
            op.bwd_ms = statistics.median(bwd_samples[i][op.id]) if bwd_samples[i][op.id] else 0.0
        for op in trace.ops:
            op.workspace_bytes, op.bwd_workspace_bytes = _workspace(log, i, op.id)
        for op_index, nbytes in trace.last_reader.values():
            trace.ops[op_index].param_bytes += nbytes
        # Per-op spans miss what runs between ops (Python, dispatch, hooks);
        # spread the block's measured wall time over its ops so that a
        # recompute costs what re-running them really costs.
        ops_ms = sum(op.fwd_ms for op in trace.ops)
        wall_ms = statistics.median(block_wall[i]) if block_wall[i] else ops_ms
        if ops_ms > 0 and wall_ms > ops_ms:
            for op in trace.ops:
                op.fwd_ms *= wall_ms / ops_ms
        blocks_fwd_ms += sum(op.fwd_ms for op in trace.ops)
        blocks_bwd_ms += sum(op.bwd_ms for op in trace.ops)
        if parallel is not None and parallel["fsdp"]:
            record.fsdp = _fsdp_fields(found[i][1], trace.name, parallel["world_size"],
                                       collectives, log)
        records.append(record)

    first, last = traces[0], traces[-1]
    shared = [inp for inp in first.inputs if inp["kind"] == "shared"]
    shared_grad_bytes = sum(inp["bytes"] for inp in shared if inp["requires_grad"])
    last_out_bytes = next(o.bytes for op in last.ops for o in op.outputs if o.id == last.output)
    nonblock_grad_bytes = root_grads["head"] if fsdp else sum(head_grads)
    end_label = f"fwd_end{len(traces) - 1}"
    # Under FSDP2 the head's backward runs after the root's pre-backward has
    # all-gathered the last block: the head's bytes end there (the
    # all-gathers are the simulator's fsdp terms, not the head's).
    head_end = (distributed.BACKWARD_MARK if log.has(distributed.BACKWARD_MARK)
                else "bwd_start")
    head_peak = log.peak(end_label, head_end) - log.live(end_label)
    fixed = {
        "param_bytes": _unique_storage_bytes(params + list(model.buffers())),
        "optimizer_state_bytes": _unique_storage_bytes(optimizer_state_tensors(optimizer)),
        "nonblock_grad_bytes": nonblock_grad_bytes,
        "embedding_grad_bytes": root_grads["embedding"] if fsdp else sum(embedding_grads),
        "embedding_saved_bytes": tracer.embedding_saved_bytes,
        "head_bytes": max(0, head_peak - nonblock_grad_bytes - last_out_bytes - shared_grad_bytes),
        "optimizer_step_bytes": max(0, log.peak("bwd_end", "opt_end") - log.live("bwd_end")),
        "head_fwd_ms": round(max(0.0, statistics.median(phase["forward"]) - blocks_fwd_ms), 6),
        "head_bwd_ms": round(max(0.0, statistics.median(phase["backward"]) - blocks_bwd_ms), 6),
        "optimizer_ms": round(statistics.median(phase["optimizer"]), 6),
    }
    if fsdp:
        fixed["fsdp_root_param_bytes"] = distributed.root_unsharded_bytes(model)
    config = model_fingerprint(model, found)
    config.update({"name": name or type(model).__name__,
                   "carried_shape": first.inputs[0]["shape"],
                   "carried_dtype": first.inputs[0]["dtype"],
                   "device": device.type})
    doc = {
        "schema": PROFILE_SCHEMA,
        "source": "pytorch",
        "device": _device_info(device),
        "model": {"name": config["name"], "config": config},
        "fixed": fixed,
        "blocks": [r.to_json() for r in records],
    }
    if parallel is not None:
        doc["parallel"] = parallel
    if path is not None:
        write_json_atomically(doc, path)
    return doc

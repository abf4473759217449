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
- Steps with every block checkpointed time what PyTorch's selective
  checkpointing costs per op (rerun_timing).
- On a GPU, each op's device time is its kernels' (device_times), and its
  host time is read apart on the wall clock (host_times); calls after
  which the host waits for the device are marked (sync_ops).

The parts: storage (tensor identity), clock, train_step, tracer (the
dispatch mode and block hooks), trace (one block's record), autograd_walk,
backward_timing, timed_passes, rerun_timing, host_times, device_times,
sync_ops, step_adapters, device_info, offload_costs, json_io, progress;
capture() below runs the passes.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any, Dict, List, Mapping, Optional, Tuple

import torch
from torch import nn

from . import (code_holds, device_times, distributed, host_times, model_state, rerun_timing,
               timed_passes)
from .blocks import BlockSpec, compiled_how, find_blocks, refuse_compiled
from .device_info import checked_host_link, device_info
from .errors import SacplanError
from .graph import BlockRecord
from .json_io import check_output_path, write_json_atomically
from .memory import AllocationLog, optimizer_state_tensors, unique_storage_bytes
from .plan_doc import PROFILE_SCHEMA, autocast_fingerprint, model_fingerprint
from .planner import outside_block_bytes
from .progress import Progress
from .step_adapters import as_step
from .storage import storage_key
from .streams import resolve_streams, stream_fingerprint
from .tracer import Tracer
from .train_step import TrainStep


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


class _Recorded:
    """The recorded step: traces, allocation log, gradient bytes outside."""

    def __init__(self, tracer: Tracer, log: AllocationLog, head_grads: List[int],
                 embedding_grads: List[int], root_grads: Dict[str, int]):
        self.tracer, self.traces, self.log = tracer, tracer.traces, log
        self.head_grads, self.embedding_grads = head_grads, embedding_grads
        self.root_grads = root_grads


def _record_step(s: TrainStep, fsdp: bool) -> _Recorded:
    """One step under the tracer and the allocation log: the graph, the
    saved tensors, the allocations, and the gradients made outside the
    blocks before and after the blocks' backward."""
    log = AllocationLog(s.device)
    tracer = Tracer(s.found, s.resident, s.clock, structure=True, log=log)
    block_params = {storage_key(p) for _, module in s.found for p in module.parameters()}
    outside = [p for p in s.params if p.requires_grad and storage_key(p) not in block_params]
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
    if fsdp:
        in_blocks = {id(m) for _, block in s.found for m in block.modules()}
        for module in s.model.modules():
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
                loss = s.loss()
            log.mark("loss_end")
            loss.backward()
            log.mark("bwd_end")
            if s.optimizer is not None:
                s.optimizer.step()
            log.mark("opt_end")
            s.model.zero_grad(set_to_none=True)
            del loss
    finally:
        tracer.remove()
        for handle in grad_hooks:
            handle.remove()
    for i, trace in enumerate(tracer.traces):
        if trace is None:
            raise SacplanError(f"blocks[{i}] ({s.found[i][0]}) did not run during the step")
    return _Recorded(tracer, log, head_grads, embedding_grads, root_grads)


def _block_records(s: TrainStep, rec: _Recorded, fwd_samples, bwd_samples, block_ms, rerun,
                   parallel: Optional[dict], collectives) -> List[BlockRecord]:
    """Each block's ops with their median times, scratch and gradients."""
    records = []
    for i, trace in enumerate(rec.traces):
        record = BlockRecord(index=i, name=trace.name, inputs=trace.inputs, ops=trace.ops,
                             outputs=trace.outputs)
        for op in trace.ops:
            op.fwd_ms = statistics.median(fwd_samples[i][op.id]) if fwd_samples[i][op.id] else 0.0
            op.bwd_ms = statistics.median(bwd_samples[i][op.id]) if bwd_samples[i][op.id] else 0.0
            op.workspace_bytes, op.bwd_workspace_bytes = _workspace(rec.log, i, op.id)
        for op_index, nbytes in trace.last_reader.values():
            trace.ops[op_index].param_bytes += nbytes
        # The block's forward in the plain steps is what a plain forward
        # costs; per-op spans only share it out. They miss what runs between
        # ops (Python, dispatch, hooks), and were timed in another pass, at
        # another moment of a shared machine (the FLUX-style test block's
        # spans came out above its plain forward): scaled up or down, the
        # ops add up to the block.
        # Kernel times (CUDA) leave out the device's waits for the host,
        # which the plain steps' wall time includes: not scaled.
        ops_ms = sum(op.fwd_ms for op in trace.ops)
        forward_ms = statistics.median(block_ms[i]) if block_ms[i] else ops_ms
        if ops_ms > 0 and not s.clocks.kernel_times:
            for op in trace.ops:
                op.fwd_ms *= forward_ms / ops_ms
        for field in rerun.samples if rerun is not None else ():
            per_op = rerun.per_op_ms(field, i)
            for op in trace.ops:
                setattr(op, field, per_op.get(op.id))
        if parallel is not None and parallel["fsdp"]:
            record.fsdp = _fsdp_fields(s.found[i][1], trace.name, parallel["world_size"],
                                       collectives, rec.log)
        records.append(record)
    return records


def _fixed(s: TrainStep, rec: _Recorded, records: List[BlockRecord], phase, fsdp: bool) -> dict:
    """The profile's "fixed" object: what runs outside the blocks."""
    first, last, log = rec.traces[0], rec.traces[-1], rec.log
    shared = [inp for inp in first.inputs if inp["kind"] == "shared"]
    shared_grad_bytes = sum(inp["bytes"] for inp in shared if inp["requires_grad"])
    last_out_bytes = sum(o.bytes for op in last.ops for o in op.outputs if o.id in last.outputs)
    nonblock_grad_bytes = rec.root_grads["head"] if fsdp else sum(rec.head_grads)
    end_label = f"fwd_end{len(rec.traces) - 1}"
    # Under FSDP2 the head's backward runs after the root's pre-backward has
    # all-gathered the last block: the head's bytes end there (the
    # all-gathers are the simulator's fsdp terms, not the head's).
    head_end = (distributed.BACKWARD_MARK if log.has(distributed.BACKWARD_MARK)
                else "bwd_start")
    # Autocast's cache lets go of every weight cast made before the head
    # (the embeddings' and the blocks') when the region ends with the loss:
    # those that no backward keeps (in the recorded step, plain autograd)
    # are freed there, as the simulator frees them.
    casts_before_head = rec.tracer.embedding_cast_bytes + sum(
        o.bytes for t in rec.traces for op in t.ops if op.autocast_cached
        for o in op.outputs
        if not any(o.id in other.backward_needs for other in t.ops))
    embedding_grad_bytes = rec.root_grads["embedding"] if fsdp else sum(rec.embedding_grads)
    # The head's and embeddings' bytes as the simulator's step phases hold
    # them: the planner inverts its own accounting (outside_blocks.h).
    # Under FSDP2 the embeddings' backward holds the root's collectives too,
    # which the fsdp terms count: no scratch is read from it there.
    embedding_start = None if fsdp else log.last_mark("0:bwd:")
    embedding_peak = (log.peak(embedding_start, "bwd_end") - log.live(embedding_start)
                      if embedding_start is not None and embedding_start.endswith(":end")
                      else 0)
    outside = outside_block_bytes(
        head_forward_peak_bytes=log.peak(end_label, "loss_end") - log.live(end_label),
        head_backward_peak_bytes=log.peak("loss_end", head_end) - log.live(end_label),
        param_grad_bytes=nonblock_grad_bytes, output_grad_bytes=last_out_bytes,
        shared_input_grad_bytes=shared_grad_bytes, freed_at_forward_end_bytes=casts_before_head,
        embedding_backward_peak_bytes=embedding_peak, embedding_grad_bytes=embedding_grad_bytes)
    blocks_fwd_ms = sum(op.fwd_ms for r in records for op in r.ops)
    blocks_bwd_ms = sum(op.bwd_ms for r in records for op in r.ops)
    model = s.model
    fixed = {
        "param_bytes": unique_storage_bytes(s.params + list(model.buffers())),
        "optimizer_state_bytes": unique_storage_bytes(optimizer_state_tensors(s.optimizer)),
        "nonblock_grad_bytes": nonblock_grad_bytes,
        "embedding_grad_bytes": embedding_grad_bytes,
        "embedding_saved_bytes": rec.tracer.embedding_saved_bytes,
        "embedding_fwd_only_bytes": rec.tracer.embedding_cast_bytes,
        "head_bytes": outside["head_bytes"],
        "head_fwd_only_bytes": outside["head_fwd_only_bytes"],
        "head_bwd_only_bytes": outside["head_bwd_only_bytes"],
        "optimizer_step_bytes": max(0, log.peak("bwd_end", "opt_end") - log.live("bwd_end")),
        "head_fwd_ms": round(max(0.0, statistics.median(phase["forward"]) - blocks_fwd_ms), 6),
        "head_bwd_ms": round(max(0.0, statistics.median(phase["backward"]) - blocks_bwd_ms), 6),
        "optimizer_ms": round(statistics.median(phase["optimizer"]), 6),
    }
    if fsdp:
        fixed["fsdp_root_param_bytes"] = distributed.root_unsharded_bytes(model)
    if outside["embedding_bwd_workspace_bytes"] > 0:
        # Scratch above the gradients the embeddings' backward makes (a
        # patch-embedding convolution's under autocast).
        fixed["embedding_bwd_workspace_bytes"] = outside["embedding_bwd_workspace_bytes"]
    return fixed


def _profile(s: TrainStep, parallel: Optional[dict], warmup: int, repeats: int,
             progress: bool, name: Optional[str], host_link: Optional[dict]) -> dict:
    """Trains capture's steps (warm-up, recorded, lifetimes, then the timed
    passes in turns) and builds the profile from them."""
    fsdp = parallel is not None and parallel["fsdp"]
    bar = Progress(warmup + 2 + 4 * repeats, progress)

    for _ in range(warmup):
        s.finish(s.loss())
        bar.advance("warm-up")

    rec = _record_step(s, fsdp)
    resolve_streams(rec.traces)
    bar.advance("graph")
    code_holds.apply(rec.traces, code_holds.measure(s.found, lambda: s.finish(s.loss())))
    bar.advance("tensor lifetimes")
    fwd_samples: List[Dict[str, list]] = [defaultdict(list) for _ in s.found]
    bwd_samples: List[Dict[str, list]] = [defaultdict(list) for _ in s.found]
    if rec.log.collectives is None and not s.clocks.kernel_times:
        # Inside a process group the recorded step waits after every
        # collective (AllocationLog): its times are not a step's. On CUDA
        # its CUDA-event spans would count the device's waits for the host.
        timed_passes.add_samples(rec.traces, s.clock, fwd_samples, bwd_samples)
    op_times = timed_passes.OpTimes(s, fwd_samples, bwd_samples)
    plain = timed_passes.PlainSteps(s, op_times.host)
    rerun = rerun_timing.RerunPasses(
        s.found, s.clocks, [{op.id for op in t.ops} for t in rec.traces],
        [{op.id for op in t.ops if op.never_save} for t in rec.traces], s.timed_step)
    timed_passes.run_passes(repeats, op_times, plain, rerun, bar)

    records = _block_records(s, rec, fwd_samples, bwd_samples, plain.block_ms, rerun.times,
                             parallel, op_times.collectives)
    if rerun.times is not None:
        timed_passes.share_unpacking(records, rerun.times, plain.phase)
    else:
        device_times.plain_checkpointed(records)
    if op_times.host is not None:
        host_times.fill(records, op_times.host, rerun.host_times, plain.phase)
    config = model_fingerprint(s.model, s.found)
    config.update({"name": name or type(s.model).__name__, "device": s.device.type})
    config.update(stream_fingerprint(rec.traces[0].inputs), **autocast_fingerprint(rec.traces))
    doc = {
        "schema": PROFILE_SCHEMA,
        "source": "pytorch",
        "device": device_info(s.device, host_link),
        "model": {"name": config["name"], "config": config},
        "fixed": _fixed(s, rec, records,
                        op_times.kernel_phase if s.clocks.kernel_times else plain.phase, fsdp),
        "blocks": [r.to_json() for r in records],
    }
    if op_times.host is not None:
        doc["fixed"]["host"] = host_times.fixed_host(records, plain.phase)
    if parallel is not None:
        doc["parallel"] = parallel
    return doc


def capture(model: nn.Module, step: Any, *, blocks: BlockSpec,
            optimizer: Optional[torch.optim.Optimizer] = None, path: Optional[str] = None,
            name: Optional[str] = None, warmup: int = 1, repeats: int = 3,
            progress: bool = False, sp: int = 1,
            host_link: Optional[Mapping[str, float]] = None) -> dict:
    """Runs real training steps of `model` and returns (and with `path`,
    writes atomically) a `sacplan.profile/1` document for it.

    step: a function model -> scalar loss that runs one step's forward on a
      fixed batch, or an example batch (tensor, tuple of args, dict of
      kwargs) whose output's mean square is the loss.
    blocks: which submodules are the blocks (see find_blocks). Every block
      must run once per step. Its tensor arguments are named by their
      parameter names; those made by the block before (a residual stream,
      or the image and text streams of a double-stream block that returns
      a tuple) are carried, the rest shared (streams.py).
    optimizer: stepped after each backward (its state and step are part of
      the profile); None trains without one.
    warmup, repeats: untimed steps first, then `repeats` timed steps (times
      are medians). One more step records the graph and the allocations,
      and one, every block checkpointed, when the blocks' code frees what
      it makes (code_holds.py).
    sp: the sequence-parallel degree the blocks run at (their all-to-alls
      are ops of the block, captured like any other call).
    host_link: the device's link to host memory, over which a plan may
      offload (`device.host_link`, docs/profile_format.md): `d2h_gbps` and
      `h2d_gbps` (GB/s each way) and optionally `host_memory_bytes`,
      `offload_host_us`, `fetch_host_us`, `copy_setup_us`. On a GPU it is
      measured when not given (pinned copies of 256 MiB, and the host
      memory available, shared by the node's GPUs); on CPU there is none
      unless given. The per-copy costs not given are measured
      (offload_costs.py).
    The model trains for warmup + 2 + 4 * repeats steps: after the warm-up
    and the two above, `repeats` rounds of four, which time the ops, a
    plain step, and two steps with every block checkpointed, to time what
    selective checkpointing costs per op (rerun_timing.py). The passes
    take turns so that each sees the machine at the same speeds
    (timed_passes.py). The model, the optimizer and the random generators
    are given back as they were, also when capture raises
    (model_state.kept: a host copy of what training changes, while it
    runs). Raises SacplanError for bad input; on error no file is written.

    Inside a torch.distributed process group, every rank calls capture and
    gets its own profile: every byte and time in it is this rank's. The
    profile's "parallel" object records the world size, sp and whether the
    blocks are FSDP2 `fully_shard` modules; under FSDP2 each block gets an
    "fsdp" object (buffer sizes, measured all-gather and reduce-scatter
    times). See docs/python.md, "Many ranks".
    """
    host_link = None if host_link is None else checked_host_link(host_link)
    found = find_blocks(model, blocks)
    parallel = distributed.parallel_info(found, sp)
    if not any(p.requires_grad for p in model.parameters()):
        raise SacplanError("model has no parameters that require gradients")
    for index, (block_name, module) in enumerate(found):
        refuse_compiled(index, block_name, compiled_how(module), "capture",
                        "pass blocks=[b._orig_mod for b in ...] or capture before compiling")
        if getattr(module, "_sacplan_applied_forward", False):
            raise SacplanError(f"blocks[{index}] ({block_name}) has a plan applied: capture "
                               "the model as it runs without checkpointing")
    if warmup < 0 or repeats < 1:
        raise SacplanError("warmup must be >= 0 and repeats >= 1")
    if path is not None:
        path = check_output_path(path)
    with model_state.kept(model, optimizer):
        # The first step makes its gradients anew, as every later one does:
        # one left from before would be accumulated into, and with warmup=0
        # that step is the recorded one.
        model.zero_grad(set_to_none=True)
        doc = _profile(TrainStep(model, found, as_step(step), optimizer), parallel, warmup,
                       repeats, progress, name, host_link)
    if path is not None:
        write_json_atomically(doc, path)
    return doc

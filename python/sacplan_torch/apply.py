"""Applying a plan.json to a PyTorch model through selective checkpointing."""

from __future__ import annotations

import functools
import inspect
import os
import sys
import warnings
import weakref
from typing import Any, Dict, List, Optional, Set, Tuple

import torch
from torch import nn
from torch.utils.checkpoint import (CheckpointPolicy, _CachingTorchDispatchMode, checkpoint,
                                    create_selective_checkpoint_contexts)

from .blocks import BlockSpec, eager_block, find_blocks
from .compiled import BlockNamer
from .errors import SacplanError, one_line
from .naming import is_collective, is_named, is_random, split_op_id
from .host_memory import check_host_fits
from .offload import (BlockCopies, HostPool, PendingCall, Triggers, checkpoint_contexts,
                      input_offload, plain_offload, trigger_contexts)
from .plan_doc import (PlanLike, check_autocast_matches, check_input_matches, load_plan,
                       model_fingerprint)
from .planner import check_random_draws

_APPLIED = "_sacplan_applied_forward"


class AppliedPlan:
    """Handle returned by apply_plan. `remove()` restores the blocks.
    `plan`: the plan as written; `entries`: per block, by index, what the
    planner derives from it and apply_plan acts on (planner.applied_plan:
    save, recompute, offload, checkpoint, the copy triggers).
    `profile` (set by auto_checkpoint) gives explain() its bytes and times.
    `host` (HostPool): the host memory the plan's offloaded activations
    hold, `host.live_bytes` now and `host.peak_bytes` at most."""

    def __init__(self, plan: Dict[str, Any], entries: List[Dict[str, Any]],
                 blocks: List[Tuple[str, nn.Module]]):
        self.plan = plan
        self.entries = entries
        self.blocks = blocks
        self.profile: Optional[Dict[str, Any]] = None
        self.host = HostPool()
        # Per block index, what its last forward sent to the host, for the
        # next block's copy triggers.
        self._copies_of: Dict[int, BlockCopies] = {}
        self._undo = []

    def remove(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo = []


# The plan applied to each model, for explain(): weak, so a model freed is
# forgotten.
_APPLIED_TO: "weakref.WeakKeyDictionary[nn.Module, AppliedPlan]" = weakref.WeakKeyDictionary()


def applied_to(model: nn.Module) -> Optional[AppliedPlan]:
    """The plan last applied to `model` and not removed, if any."""
    return _APPLIED_TO.get(model)


def _trace_enabled() -> bool:
    return os.environ.get("SACPLAN_TRACE", "") not in ("", "0")


def _check_modules_exist(index: int, block: nn.Module, field: str, op_ids: List[str]) -> None:
    for op_id in op_ids:
        path, _, _ = split_op_id(op_id)
        if not path:
            continue
        try:
            block.get_submodule(path)
        except AttributeError:
            raise SacplanError(
                f"plan: blocks[{index}].{field} names op '{op_id}', but the block has "
                f"no submodule '{path}'") from None


def _split_offload(index: int, block: nn.Module, offload: List[str]) -> Tuple[Set[str], Set[str]]:
    """(input names, op ids) of a block's offload list: an id naming an
    argument of the block's forward is a carried input."""
    params = inspect.signature(block.forward).parameters
    inputs = {name for name in offload if name in params}
    ops = set(offload) - inputs
    _check_modules_exist(index, block, "offload", sorted(ops))
    return inputs, ops


def _bound_inputs(forward, names: Set[str], args, kwargs) -> List[torch.Tensor]:
    if not names:
        return []
    bound = inspect.signature(forward).bind(*args, **kwargs).arguments
    return [bound[name] for name in sorted(names) if isinstance(bound.get(name), torch.Tensor)]


def _check_all_ran(index: int, save: Set[str], named: Set[str], seen: Set[str],
                   offload: Set[str] = frozenset()) -> None:
    for field, ids in (("save", save), ("offload", offload),
                       ("recompute", named - save - offload)):
        missing = sorted(ids - seen)
        if missing:
            raise SacplanError(
                f"plan: blocks[{index}].{field} names op ids the block does not run: "
                f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")


class _TracedForward(_CachingTorchDispatchMode):
    """The forward context of a checkpoint AOTAutograd traces, once per
    traced graph: names the calls from zero, then checks the ids named
    (`namer.check_traced`). It extends PyTorch's own forward mode because
    compile accepts only TorchDispatchModes from `context_fn`."""

    def __init__(self, forward_mode, namer: BlockNamer):
        super().__init__(forward_mode.policy_fn, forward_mode.storage)
        self.namer = namer

    def __enter__(self):
        self.namer.begin_trace()
        return super().__enter__()

    def __exit__(self, exc_type, exc, tb):
        result = super().__exit__(exc_type, exc, tb)
        self.namer.tracing = False
        if exc_type is None:
            self.namer.check_traced(set(self.namer.traced))
        return result


def _traced_contexts(policy, namer: BlockNamer):
    forward_mode, recompute_mode = create_selective_checkpoint_contexts(policy)
    return _TracedForward(forward_mode, namer), recompute_mode


def _wrap_block(applied: AppliedPlan, index: int, block: nn.Module, save: Set[str],
                named: Set[str], checkpointed: bool, offload_inputs: Set[str],
                offload_ops: Set[str], triggers: Dict[str, str],
                block_before_leads: bool) -> None:
    """`named`: every op id the plan names for the block (its profile's ops:
    save and recompute), each of which the block must run. A block not
    `checkpointed` runs plainly, offloading what the plan says. `triggers`:
    the block's `spill_trigger` and `lead_trigger` that it acts at (where
    the copies of the block before end, and its own start);
    `block_before_leads`: the block before's `lead`."""
    namer = BlockNamer(block)
    # Bound here, not in the traced forward: dynamo would turn the block
    # index into a symbolic int when the next block recompiles the forward.
    namer.check_traced = functools.partial(_check_all_ran, index, save, named)
    original = block.forward
    seen: Set[str] = set()
    draws: List[Tuple[str, bool]] = []
    # draws_random: None until the first forward has shown whether the
    # block draws random numbers. A block that draws none needs no generator
    # state in its checkpoint: PyTorch would otherwise stash the CPU
    # generator's state (5,056 bytes of host memory) per block until its
    # backward, which on a CPU is memory the plan does not count.
    state = {"checked": False, "draws_random": None}
    pending = PendingCall()

    trace = _trace_enabled()
    traced: Set[Tuple[str, bool]] = set()

    def policy(ctx, func, *args, **kwargs):
        if not is_named(func):
            return CheckpointPolicy.PREFER_RECOMPUTE
        op_id = namer.traced_name(func) if namer.tracing else namer.name(func)
        # An offloaded op is in `save` too (docs/plan_format.md).
        offloaded = op_id in offload_ops
        if offloaded and is_collective(func):
            raise SacplanError(
                f"plan: blocks[{index}].offload names collective '{one_line(op_id)}'; "
                "collectives stay saved on the device")
        saved = not offloaded and (op_id in save or is_collective(func))
        if not ctx.is_recompute and not namer.tracing:
            seen.add(op_id)
            if not state["checked"] and is_random(func, args, kwargs):
                # An offloaded call draws nothing in the re-run either.
                draws.append((op_id, saved or offloaded))
            elif state["draws_random"] is False and is_random(func, args, kwargs):
                raise SacplanError(
                    f"blocks[{index}] draws random numbers in '{one_line(op_id)}' though its "
                    "first step drew none, so its checkpoint keeps no generator state and the "
                    "re-run would draw other numbers; apply the plan again to check anew")
        if trace and (op_id, ctx.is_recompute) not in traced:
            # SACPLAN_TRACE: once per op id and pass, for the trainer's log.
            traced.add((op_id, ctx.is_recompute))
            decision = "save" if saved else "offload" if offloaded else "recompute"
            print(f"sacplan: block {index} {'recompute' if ctx.is_recompute else 'forward'} "
                  f"{one_line(op_id)}: {decision}", file=sys.stderr, flush=True)
        if offloaded:
            # The mode under the checkpoint's copies it out, and gives the
            # copy back in the re-run (sacplan_torch.offload).
            pending.set(func, op_id)
        if not ctx.is_recompute and forward_state["triggers"] is not None:
            forward_state["triggers"].named(func, op_id)
        return CheckpointPolicy.MUST_SAVE if saved else CheckpointPolicy.PREFER_RECOMPUTE

    # The forward running now: its copies and the block before's triggers.
    forward_state: Dict[str, Any] = {"copies": None, "triggers": None}

    def contexts():
        sac = create_selective_checkpoint_contexts(policy)
        if offload_ops:
            return checkpoint_contexts(sac, pending, applied.host, forward_state["copies"],
                                       forward_state["triggers"])
        if triggers:
            return trigger_contexts(sac, forward_state["triggers"])
        return sac

    def run(*args, **kwargs):
        if not torch.compiler.is_compiling():
            namer.reset()
        return original(*args, **kwargs)

    def forward(*args, **kwargs):
        if torch.compiler.is_compiling():
            if offload_inputs or offload_ops or triggers:
                through = "" if offload_inputs or offload_ops else \
                    " (the block before does, through it)"
                raise SacplanError(
                    f"plan: blocks[{index}] offloads to the host{through}, which apply_plan "
                    "does not do in a compiled block yet: plan without offload (host budget 0)")
            # The eager checks below would run at dynamo's trace, before any
            # call is named; the op ids are checked when AOTAutograd has
            # traced the block (_traced_contexts).
            return checkpoint(run, *args, use_reentrant=False,
                              context_fn=functools.partial(_traced_contexts, policy, namer),
                              **kwargs)
        if not state["checked"]:
            check_input_matches(applied.plan, original, args, kwargs)
        if not torch.is_grad_enabled():
            return original(*args, **kwargs)
        inputs = _bound_inputs(original, offload_inputs, args, kwargs)
        offloads = bool(offload_inputs or offload_ops)
        copies = BlockCopies(plain=not checkpointed,
                             defer=offloads and "spill_trigger" in triggers)
        forward_triggers = Triggers(triggers.get("spill_trigger", ""),
                                    triggers.get("lead_trigger", ""), copies,
                                    applied._copies_of.pop(index - 1, None), block_before_leads)
        forward_state["copies"], forward_state["triggers"] = copies, forward_triggers
        try:
            if not checkpointed:
                with plain_offload(namer.name, offload_ops, inputs, applied.host, seen, copies,
                                   forward_triggers):
                    out = run(*args, **kwargs)
            else:
                with input_offload(inputs, applied.host, copies):
                    out = checkpoint(run, *args, use_reentrant=False, context_fn=contexts,
                                     preserve_rng_state=state["draws_random"] is not False,
                                     **kwargs)
                forward_triggers.resolve()
        finally:
            forward_state["copies"], forward_state["triggers"] = None, None
        copies.finish_forward(applied.host)
        if offloads:
            applied._copies_of[index] = copies
        for field, op_id in triggers.items():
            if not state["checked"] and field.split("_")[0] not in forward_triggers.fired:
                raise SacplanError(f"plan: blocks[{index}].{field} names op id "
                                   f"'{one_line(op_id)}', which the block does not run")
        if not state["checked"]:
            forward_draws = list(draws)
            draws.clear()
            state["draws_random"] = bool(forward_draws)
            # PyTorch's re-run replays the generator from the block's
            # start (docs/memory_model.md, "Random ops"): the planner's rule.
            check_random_draws(index, forward_draws)
            # Stays unchecked when one is missing: every later forward
            # refuses too. A plan for another model names other ops.
            _check_all_ran(index, save, named, seen, offload_ops)
            state["checked"] = True
        return out

    setattr(block, _APPLIED, True)
    block.forward = forward

    def undo():
        namer.remove()
        del block.forward
        delattr(block, _APPLIED)

    applied._undo.append(undo)


def apply_plan(model: nn.Module, plan: PlanLike, *, blocks: BlockSpec,
               model_name: str | None = None, profile=None) -> AppliedPlan:
    """Checkpoints the model's blocks as `plan` says.

    Each block the plan checkpoints (one that recomputes an op: its
    `checkpoint` flag, which sacplan's reader holds to that meaning,
    docs/plan_format.md) runs under
    `torch.utils.checkpoint.checkpoint(use_reentrant=False)` with a selective
    checkpoint policy: `MUST_SAVE` for the aten calls whose op id (see
    sacplan_torch.naming) is in the block's `save` list and for collectives
    (`_c10d_functional`), `PREFER_RECOMPUTE` for every other call. The
    other blocks are left as they are. The blocks are changed in
    place (their `forward`), so apply before or after FSDP2's `fully_shard`.

    What a block's `offload` list names (schema /2) is kept in host memory
    instead (sacplan_torch.offload, docs/python.md "Offload"): an op's
    outputs are copied out as the op returns and given back in the
    checkpoint's re-run in the op's place, a carried input (an argument of
    the block's forward) when checkpoint or autograd saves it; in a block
    with `checkpoint: false`, through autograd's saved-tensor hooks. The
    handle's `host` counts the host bytes. Not in compiled blocks. A plan
    whose predicted host peak exceeds the host memory available now (over
    the node's GPUs) is refused before anything is pinned.

    Raises SacplanError for a plan made for another model (block count,
    block type, parameter counts, `model_name`), an op id naming a submodule
    the block lacks, or a block spec that matches nothing; at the first
    forward, for another input shape or dtype and for op ids the block never
    runs. Blocks compiled with torch.compile, before or after, work
    (docs/python.md, "torch.compile"): the policy names the calls AOTAutograd
    traces, and op ids the block never runs are refused while it compiles.
    The plan is read by sacplan's own reader (the command line's, in this
    process), which refuses what `sacplan simulate` refuses with the same
    message, and what the blocks do (checkpointed or not, the copy
    triggers they act at) is what the planner derives from it. With
    `profile` (the capture of this model, a dict or a path), it is also
    checked against it as `sacplan simulate` does: model name and config,
    graph fingerprint, one entry per block, op ids the blocks have, a
    `checkpoint` flag or `recompute` list that contradicts the save set
    (tests/conformance).

    Returns a handle whose `remove()` undoes the change.
    """
    # torch.compile(block) wraps the block: the plan goes on the eager
    # block inside, which the wrapper's compiled code calls.
    found = [(name, eager_block(block)) for name, block in find_blocks(model, blocks)]
    plan, reading = load_plan(plan, profile=profile, model_name=model_name,
                              model_config=model_fingerprint(model, found))
    entries = reading["blocks"]
    semantics = reading["semantics"]
    if semantics != "torch-sac":
        warnings.warn(
            f"plan was made for '{semantics}' semantics"
            + ("" if "semantics" in plan else " (it names none, which reads as sacplan)")
            + "; PyTorch's selective checkpointing is 'torch-sac' (sacplan plan "
            "--semantics torch-sac), so its predicted peak and step time will not hold",
            stacklevel=2)
    offloads = []
    for index, (name, block) in enumerate(found):
        if getattr(block, _APPLIED, False):
            raise SacplanError(f"blocks[{index}] ({name}): a plan is already applied")
        entry = entries[index]
        _check_modules_exist(index, block, "save", entry["save"])
        for field in ("spill_trigger", "lead_trigger"):
            if entry[field]:
                _check_modules_exist(index, block, field, [entry[field]])
        offloads.append(_split_offload(index, block, entry["offload"]))
    if any(inputs or ops for inputs, ops in offloads):
        check_host_fits(plan)
    applied = AppliedPlan(plan, entries, found)
    for index, (name, block) in enumerate(found):
        entry = entries[index]
        offload_inputs, offload_ops = offloads[index]
        # The copy triggers the block acts at (docs/python.md, "Offload").
        triggers = {field: entry[field] for field in ("spill_trigger", "lead_trigger")
                    if entry[field]}
        if entry["checkpoint"] or offload_inputs or offload_ops or triggers:
            _wrap_block(applied, index, block, set(entry["save"]),
                        set(entry["save"]) | set(entry["recompute"]), entry["checkpoint"],
                        offload_inputs, offload_ops, triggers, entry["block_before_leads"])
    for index, (name, block) in enumerate(found):
        hook = block.register_forward_pre_hook(
            functools.partial(_check_autocast, plan, index, name), with_kwargs=True)
        applied._undo.append(hook.remove)
    _APPLIED_TO[model] = applied
    applied._undo.insert(0, functools.partial(_forget, weakref.ref(model)))
    return applied


def _check_autocast(plan: Dict[str, Any], index: int, name: str, module, args,
                    kwargs) -> None:
    """A block's forward pre-hook: the plan's times and bytes, its op ids
    (autocast's casts) and its policy hold only under the autocast its
    profile was captured under. Checked at every training forward, since a
    step may enter autocast after the first; not while compiling, where
    apply_plan's eager checks do not run."""
    if torch.is_grad_enabled() and not torch.compiler.is_compiling():
        check_autocast_matches(plan, index, name, args, kwargs)


def _forget(model_ref: "weakref.ref[nn.Module]") -> None:
    # By weak reference: the handle is _APPLIED_TO's value, and a value that
    # held its key would keep the model (and its optimizer's view of it)
    # alive for the life of the process.
    model = model_ref()
    if model is not None:
        _APPLIED_TO.pop(model, None)

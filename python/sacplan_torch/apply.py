"""Applying a plan.json to a PyTorch model through selective checkpointing."""

from __future__ import annotations

import functools
import warnings
from typing import Any, Dict, List, Set, Tuple

import torch
from torch import nn
from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                    create_selective_checkpoint_contexts)

from .blocks import BlockSpec, compiled_around, find_blocks, refuse_compiled
from .errors import SacplanError
from .naming import OpNamer, is_collective, is_named, is_random, split_op_id
from .plan import PlanLike, check_input_matches, check_plan_matches, load_plan

_APPLIED = "_sacplan_applied_forward"


class AppliedPlan:
    """Handle returned by apply_plan. `remove()` restores the blocks."""

    def __init__(self, plan: Dict[str, Any], blocks: List[Tuple[str, nn.Module]]):
        self.plan = plan
        self.blocks = blocks
        self._undo = []

    def remove(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo = []


def _check_modules_exist(index: int, block: nn.Module, save: List[str]) -> None:
    for op_id in save:
        path, _, _ = split_op_id(op_id)
        if not path:
            continue
        try:
            block.get_submodule(path)
        except AttributeError:
            raise SacplanError(
                f"plan: blocks[{index}].save names op '{op_id}', but the block has "
                f"no submodule '{path}'") from None


def _first_tensor(args, kwargs):
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value
    return None


def _check_random_replay(index: int, draws: List[Tuple[str, bool]]) -> None:
    """Refuses a plan that saves a random op and recomputes a later one.

    checkpoint restores the generator to its state at the block's start
    before the re-run, and a saved (cached) call draws nothing there, so a
    recomputed random call draws the forward's numbers only when every
    random call before it is recomputed too (docs/memory_model.md, "Random
    ops"). `draws`: the block's random calls in forward order, with whether
    the policy saved each."""
    saved_first = None
    for op_id, saved in draws:
        if saved:
            saved_first = saved_first or op_id
        elif saved_first is not None:
            raise SacplanError(
                f"plan: blocks[{index}] saves random op '{saved_first}' and recomputes "
                f"the later random op '{op_id}', which would draw other numbers than in "
                "the forward and change the gradients; save every random op from the "
                "first saved one on, or none")


_EAGER_ONLY = ("apply the plan to the model with this block uncompiled: dynamo cannot trace "
               "the plan's policy, so a checkpointed block runs eagerly anyway")


def _refuse_compiled(model: nn.Module, index: int, name: str, block: nn.Module) -> None:
    refuse_compiled(index, name, compiled_around(model, name, block), "apply_plan",
                    _EAGER_ONLY)


def _wrap_block(applied: AppliedPlan, model: nn.Module, index: int, name: str,
                block: nn.Module, save: Set[str], named: Set[str]) -> None:
    """`named`: every op id the plan names for the block (its profile's ops:
    save and recompute), each of which the block must run."""
    namer = OpNamer(block)
    original = block.forward
    seen: Set[str] = set()
    draws: List[Tuple[str, bool]] = []
    state = {"checked": False}

    def policy(ctx, func, *args, **kwargs):
        if not is_named(func):
            return CheckpointPolicy.PREFER_RECOMPUTE
        op_id = namer.name(func)
        saved = op_id in save or is_collective(func)
        if not ctx.is_recompute:
            seen.add(op_id)
            if not state["checked"] and is_random(func, args, kwargs):
                draws.append((op_id, saved))
        return CheckpointPolicy.MUST_SAVE if saved else CheckpointPolicy.PREFER_RECOMPUTE

    def run(*args, **kwargs):
        namer.reset()
        return original(*args, **kwargs)

    def forward(*args, **kwargs):
        if not state["checked"]:
            _refuse_compiled(model, index, name, block)
            carried = _first_tensor(args, kwargs)
            if carried is not None:
                check_input_matches(applied.plan, list(carried.shape),
                                    str(carried.dtype).replace("torch.", ""))
        if not torch.is_grad_enabled():
            return original(*args, **kwargs)
        out = checkpoint(run, *args, use_reentrant=False,
                         context_fn=functools.partial(create_selective_checkpoint_contexts, policy),
                         **kwargs)
        if not state["checked"]:
            forward_draws = list(draws)
            draws.clear()
            _check_random_replay(index, forward_draws)
            # Stays unchecked when one is missing: every later forward
            # refuses too. A plan for another model names other ops.
            for field, ids in (("save", save), ("recompute", named - save)):
                missing = sorted(ids - seen)
                if missing:
                    raise SacplanError(
                        f"plan: blocks[{index}].{field} names op ids the block does not run: "
                        f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
            state["checked"] = True
        return out

    setattr(block, _APPLIED, True)
    # Dynamo cannot trace the policy's op naming (module hooks mutate the
    # namer inside checkpoint's region, a side effect it refuses), so a
    # compiler reaching this forward runs it eagerly, where the first call
    # refuses a compiled block with the message below.
    block.forward = torch.compiler.disable(
        forward, reason="sacplan apply_plan: a block with a plan runs eagerly; "
        "do not torch.compile it (docs/python.md, \"torch.compile\")")

    def undo():
        namer.remove()
        del block.forward
        delattr(block, _APPLIED)

    applied._undo.append(undo)


def apply_plan(model: nn.Module, plan: PlanLike, *, blocks: BlockSpec,
               model_name: str | None = None) -> AppliedPlan:
    """Checkpoints the model's blocks as `plan` says.

    Each block whose plan entry has `checkpoint: true` runs under
    `torch.utils.checkpoint.checkpoint(use_reentrant=False)` with a selective
    checkpoint policy: `MUST_SAVE` for the aten calls whose op id (see
    sacplan_torch.naming) is in the block's `save` list and for collectives
    (`_c10d_functional`), `PREFER_RECOMPUTE` for every other call. Blocks
    with `checkpoint: false` are left as they are. The blocks are changed in
    place (their `forward`), so apply before or after FSDP2's `fully_shard`.

    Raises SacplanError for a plan made for another model (block count,
    block type, parameter counts, `model_name`), an op id naming a submodule
    the block lacks, a block spec that matches nothing, or a checkpointed
    block compiled with torch.compile; at the first forward, for another
    input shape or dtype, op ids the block never runs, or a block compiled
    after apply_plan (docs/python.md, "torch.compile"). Returns a handle whose `remove()` undoes the change.
    """
    plan = load_plan(plan)
    found = find_blocks(model, blocks)
    for index, (name, block) in enumerate(found):
        if index < len(plan["blocks"]) and plan["blocks"][index].get("checkpoint", True):
            _refuse_compiled(model, index, name, block)
    check_plan_matches(plan, model, found, model_name)
    if plan.get("semantics", "torch-sac") != "torch-sac":
        warnings.warn(
            f"plan was made for '{plan.get('semantics')}' semantics; PyTorch's selective "
            "checkpointing is 'torch-sac' (sacplan plan --semantics torch-sac), so its "
            "predicted peak and step time will not hold", stacklevel=2)
    for index, (name, block) in enumerate(found):
        if getattr(block, _APPLIED, False):
            raise SacplanError(f"blocks[{index}] ({name}): a plan is already applied")
        _check_modules_exist(index, block, plan["blocks"][index]["save"])
    applied = AppliedPlan(plan, found)
    for index, (name, block) in enumerate(found):
        entry = plan["blocks"][index]
        if entry.get("checkpoint", True):
            _wrap_block(applied, model, index, name, block, set(entry["save"]),
                        set(entry["save"]) | set(entry.get("recompute", [])))
    return applied

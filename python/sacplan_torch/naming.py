"""Stable op ids for the aten calls a block makes.

An op id is `<module path>.<aten op>` with `.<n>` appended for the n-th
repeat (n >= 1) of the same aten op inside the same module call sequence of
one block forward, e.g. `self_attn.q.addmm`, `self_attn.q._to_copy.1`,
`norm1.native_layer_norm`, `gelu` (a functional call in the block's own
forward). The module path is relative to the block and names the innermost
submodule whose forward is running. Ids are decided when the call is
dispatched, so the capture (which writes them into profile.json) and the
selective-checkpoint policy (which reads them from plan.json) name every
call the same way, and blocks of one structure get the same ids.

Calls that PyTorch's selective checkpointing never shows its policy
(`torch.utils.checkpoint.SAC_IGNORED_OPS`, e.g. `aten.detach`) are not
named, because checkpointing inserts a different number of them in the
forward and in the recompute.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import torch
from torch import nn
from torch.utils.checkpoint import SAC_IGNORED_OPS


def aten_name(func) -> str:
    """`aten.addmm.default` -> `addmm`; other namespaces keep theirs
    (`_c10d_functional.all_gather_into_tensor`)."""
    packet = func.overloadpacket
    namespace = getattr(func, "namespace", "aten")
    name = packet.__name__
    return name if namespace == "aten" else f"{namespace}.{name}"


def is_named(func) -> bool:
    return func not in SAC_IGNORED_OPS and isinstance(func, torch._ops.OpOverload)


# Bookkeeping of the autograd-aware functional collectives: it attaches the
# autograd node to a collective's output and communicates nothing. Caching
# it under selective checkpointing would leave the recompute without that
# node (fewer saved tensors than the forward: a CheckpointError), so it is
# recomputed like any other call.
_NOT_COLLECTIVES = {"_wrap_tensor_autograd"}


def is_collective(func) -> bool:
    """A functional collective or its wait (`_c10d_functional.*`): what
    apply_plan always saves so that backward never re-issues it."""
    return (getattr(func, "namespace", "") in ("_c10d_functional", "c10d_functional")
            and func.overloadpacket.__name__ not in _NOT_COLLECTIVES)


def is_random(func, args=(), kwargs=None) -> bool:
    """Whether the call draws from a random number generator (dropout's
    bernoulli_ or native_dropout, rand, randn, randint, normal, multinomial,
    ...), read from what the op declares of itself: aten tags every op that
    may draw `nondeterministic_seeded`. The attention kernels carry the tag
    for their dropout and draw only when their `dropout_p` is above 0."""
    if torch.Tag.nondeterministic_seeded not in getattr(func, "tags", ()):
        return False
    for i, arg in enumerate(func._schema.arguments):
        if arg.name == "dropout_p":
            value = args[i] if i < len(args) else (kwargs or {}).get(arg.name, 0.0)
            return bool(value)
    return True


def autocast_cast_dtypes(device_types) -> Dict[str, torch.dtype]:
    """Per device type among `device_types`, the low-precision dtype autocast
    casts to, for those whose autocast is on with its cache on: where
    `cached_cast` (aten/src/ATen/autocast_mode.cpp) caches weight casts.
    Read outside the dispatcher (a block's pre-hook): inside a dispatch mode
    autocast reads as off."""
    if not torch.is_autocast_cache_enabled():
        return {}
    return {d: torch.get_autocast_dtype(d) for d in device_types
            if torch.is_autocast_enabled(d)}


def autocast_dtype_of(device_type: str) -> Optional[str]:
    """The dtype autocast casts to on `device_type` ("bfloat16"), its cache
    on or off, or None when autocast is off there. Read outside the
    dispatcher, as autocast_cast_dtypes."""
    if not torch.is_autocast_enabled(device_type):
        return None
    return str(torch.get_autocast_dtype(device_type)).replace("torch.", "")


def is_autocast_cached(func, args, out, dtypes: Dict[str, torch.dtype]) -> bool:
    """Whether autocast's cache keeps the call's output until its region
    ends: a copy (`_to_copy`) of an fp32 leaf that requires grad and is not
    a view (a parameter), to the autocast dtype of its device; the conditions
    of `cached_cast`. A cast the block's own code writes (`w.to(bf16)`)
    looks the same from here and is counted too."""
    if not dtypes or aten_name(func) != "_to_copy" or not args:
        return False
    src = args[0]
    if not isinstance(src, torch.Tensor) or not isinstance(out, torch.Tensor):
        return False
    return (src.dtype == torch.float32 and src.requires_grad and src.is_leaf
            and not src._is_view() and out.dtype == dtypes.get(src.device.type))


def split_op_id(op_id: str) -> Tuple[str, str, int]:
    """Inverse of OpNamer.name: (module path, aten op, repeat index)."""
    parts = op_id.split(".")
    index = 0
    if len(parts) >= 2 and parts[-1].isdigit():
        index = int(parts[-1])
        parts = parts[:-1]
    # Namespaced ops ("_c10d_functional.all_reduce") keep their namespace.
    if len(parts) >= 2 and parts[-2] in ("_c10d_functional", "c10d_functional"):
        return ".".join(parts[:-2]), ".".join(parts[-2:]), index
    return ".".join(parts[:-1]), parts[-1], index


class OpNamer:
    """Tracks the running submodule of one block and names its aten calls.

    Installs forward pre/post hooks on every submodule of `block` (not on the
    block itself, whose forward the caller wraps). Call `reset()` at the start
    of each block forward, including a checkpoint's recompute; `remove()`
    takes the hooks away.
    """

    def __init__(self, block: nn.Module):
        self._stack: List[str] = [""]
        self._counts: Dict[Tuple[str, str], int] = {}
        self._handles = []
        for path, module in block.named_modules():
            if module is block:
                continue
            self._handles.append(module.register_forward_pre_hook(self._enter(path)))
            self._handles.append(
                module.register_forward_hook(self._leave(path), always_call=True))

    def _enter(self, path):
        def hook(module, args):
            self._stack.append(path)
        return hook

    def _leave(self, path):
        def hook(module, args, output):
            if len(self._stack) > 1 and self._stack[-1] == path:
                self._stack.pop()
        return hook

    def reset(self) -> None:
        self._stack = [""]
        self._counts = {}

    @property
    def module_path(self) -> str:
        return self._stack[-1]

    def name(self, func) -> str:
        """The id of this call; counts it. Only for calls with is_named(func)."""
        path = self._stack[-1]
        op = aten_name(func)
        key = (path, op)
        index = self._counts.get(key, 0)
        self._counts[key] = index + 1
        base = f"{path}.{op}" if path else op
        return base if index == 0 else f"{base}.{index}"

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

"""Tensors identified by the storage they own: a view of an op's output is
that output, and the tensors an autograd node keeps are matched to the ops
that made them by storage."""

from __future__ import annotations

from typing import List, Optional, Tuple

import torch
from torch.utils._pytree import tree_flatten

from . import distributed

StorageKey = Tuple[str, int]


def storage_key(t: torch.Tensor) -> Optional[StorageKey]:
    """(device, storage address), or None for storage-less tensors."""
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


def tensors_of(tree) -> List[torch.Tensor]:
    """The tensors among the leaves of a pytree (args, outputs)."""
    leaves, _ = tree_flatten(tree)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def fresh_outputs(out, in_keys: set, written: set, *excluded: set
                  ) -> List[Tuple[StorageKey, torch.Tensor]]:
    """The outputs of a call that are tensors of the profile, as (storage,
    tensor), in order: new storage, or an input the call wrote in place (a
    new version); not an alias of an input, nor storage in `excluded`."""
    fresh = []
    for o in tensors_of(out):
        key = storage_key(o)
        if key is None or any(key in keys for keys in excluded):
            continue
        if key in in_keys and key not in written:
            continue
        fresh.append((key, o))
    return fresh


def output_id(op_id: str, j: int) -> str:
    """The id of the j-th fresh output of op `op_id`."""
    return f"{op_id}.out" if j == 0 else f"{op_id}.out{j}"


def written_args(func, args, kwargs) -> List[torch.Tensor]:
    """The tensor arguments an in-place or out= call writes."""
    written = []
    schema = func._schema
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = args[i] if i < len(args) else kwargs.get(arg.name)
        written += tensors_of(value)
    return written


def saved_tensors(node) -> List[torch.Tensor]:
    """What an autograd node keeps for its backward."""
    found = []
    for attr in dir(node):
        if not attr.startswith("_saved_"):
            continue
        try:
            value = getattr(node, attr)
        except RuntimeError:  # freed already, or not accessible
            continue
        found += tensors_of(value)
    if not found and hasattr(node, "saved_tensors"):
        try:
            found += tensors_of(node.saved_tensors)
        except RuntimeError:
            pass
    return found


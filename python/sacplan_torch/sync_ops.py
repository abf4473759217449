"""Aten calls after which the host waits until the device has finished
them (an op's `"syncs": true` in the profile, docs/profile_format.md).

On a GPU the host runs ahead of the device, queueing kernels; a call whose
result the host must read, or whose output size depends on the data, makes
it wait for the device to drain its queue. The planner's two timelines then
meet there (host_t = max(host_t, device_t)): work queued behind such a call
cannot hide the host's time, nor the host's the device's.

Decided by the call's name and, for copies, by the devices of their source
and destination. `torch.cuda.synchronize()` and event or stream waits on
the host are not aten calls and go unseen.
"""

from __future__ import annotations

import torch

from .naming import aten_name

# Calls that always hand the host a value computed on the device, or an
# output whose size the host learns only from the device's result.
_BY_NAME = {
    # .item(), .tolist(), float(t), bool(t), if t: ...: a device value read
    # on the host.
    "_local_scalar_dense",
    # Output sizes that depend on the data: the host reads how many
    # elements there are before it can allocate the output.
    "nonzero",          # and argwhere, torch.where(cond) (one argument)
    "masked_select",    # via nonzero
    "_unique", "_unique2", "unique_dim", "unique_consecutive", "unique_dim_consecutive",
    # aten.equal returns a Python bool: the comparison's result, read.
    "equal",
    "is_nonzero",
}

# Calls that sync only in some forms (see syncs()).
_REPEAT_INTERLEAVE = "repeat_interleave"   # without output_size: sums the repeats
_INDEXING = {"index", "index_put", "index_put_", "_index_put_impl_"}  # with boolean masks
_COPIES = {"_to_copy", "copy_", "_copy_from", "_copy_from_and_resize"}


def _is_mask(t) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype in (torch.bool, torch.uint8)


def _to_host(src, dst, non_blocking: bool) -> bool:
    """A copy from an accelerator into host memory waits for it, unless it is
    non_blocking into pinned memory (then the copy is queued like a kernel;
    _to_copy pins its output itself when asked for non_blocking)."""
    if not isinstance(src, torch.Tensor) or not isinstance(dst, torch.Tensor):
        return False
    if src.device.type == "cpu" or dst.device.type != "cpu":
        return False
    return not (non_blocking and dst.is_pinned())


def _arg(func, args, kwargs, name: str, default=None):
    for i, arg in enumerate(func._schema.arguments):
        if arg.name == name:
            return args[i] if i < len(args) else kwargs.get(name, default)
    return default


def syncs(func, args, kwargs, out) -> bool:
    """Whether issuing `func(*args, **kwargs)`, which returned `out`, makes
    the host wait for the device."""
    name = aten_name(func)
    if name in _BY_NAME:
        return True
    if name == _REPEAT_INTERLEAVE:
        return _arg(func, args, kwargs, "output_size") is None and \
            isinstance(_arg(func, args, kwargs, "repeats"), torch.Tensor)
    if name in _INDEXING:
        indices = _arg(func, args, kwargs, "indices") or ()
        return any(_is_mask(t) for t in indices)
    if name in _COPIES:
        non_blocking = bool(_arg(func, args, kwargs, "non_blocking", False))
        if name == "_to_copy":
            return _to_host(args[0] if args else None, out, non_blocking)
        # copy_(self=dst, src); _copy_from(self=src, dst).
        src, dst = (args[1], args[0]) if name == "copy_" else (args[0], args[1])
        return _to_host(src, dst, non_blocking)
    return False

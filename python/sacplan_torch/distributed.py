"""Many ranks: what capture and the memory meter need from torch.distributed.

A profile describes one rank (docs/profile_format.md, "parallel"). This
module reads the rank's parallel layout (world size, FSDP2, sequence-parallel
degree), the per-block FSDP2 buffer sizes, and times FSDP2's collectives.

CollectiveSync exists because of how gloo frees memory: a collective runs on
a gloo worker thread, and the Work object that holds its input and output
tensors is often released there. The profiler's allocation record is
thread-local, so those frees go missing and the live count drifts up by a
buffer per lost free, differently in every run. Waiting on each collective
at once and letting the worker drop its reference before the caller does
puts every free back on the thread that is recorded (see
docs/python.md, "Many ranks").
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .errors import SacplanError

# How long the caller waits after a collective completed so that the gloo
# worker thread has dropped its own reference to the Work first.
_SETTLE_S = 0.002

# The first thing FSDP2 does in backward (the root's pre-backward, which
# all-gathers the last block ahead of the head's backward).
BACKWARD_MARK = "fsdp:pre_backward"
_PRE_BACKWARD = "FSDP::pre_backward"

# FSDP2 names its collectives' record_function ranges "FSDP::all_gather
# (blocks.3)" and "FSDP::post_backward_reduce (blocks.3)".
_FSDP_LABEL = re.compile(r"^FSDP::(all_gather|post_backward_reduce) \((.+)\)$")


def active() -> bool:
    """True inside an initialized torch.distributed process group."""
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def from_rank0(obj, rank: int):
    """rank 0's object on every rank (the object as is without a group of
    several ranks)."""
    if not (active() and torch.distributed.get_world_size() > 1):
        return obj
    box = [obj if rank == 0 else None]
    torch.distributed.broadcast_object_list(box, src=0)
    return box[0]


def local(t: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a DTensor (FSDP2's sharded parameters and the
    optimizer state over them); any other tensor as it is."""
    inner = getattr(t, "_local_tensor", None)
    return inner if isinstance(inner, torch.Tensor) else t


def _is_fsdp(module: nn.Module) -> bool:
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return False
    return isinstance(module, FSDPModule)


def parallel_info(blocks: List[Tuple[str, nn.Module]], sp: int) -> Optional[dict]:
    """The profile's "parallel" object for this rank, or None for one
    process without FSDP2 and without sequence parallelism.

    FSDP2 is on when every block is a `fully_shard` module; a mix is refused
    (the simulator shards all blocks or none). Raises SacplanError for an
    sp that does not divide the world size."""
    if not isinstance(sp, int) or sp < 1:
        raise SacplanError(f"sp must be an integer >= 1, got {sp!r}")
    sharded = [_is_fsdp(module) for _, module in blocks]
    if any(sharded) and not all(sharded):
        first = blocks[sharded.index(False)][0]
        raise SacplanError(f"blocks: some blocks are fully_shard modules and {first} is not; "
                           "shard every block or none")
    world = torch.distributed.get_world_size() if active() else 1
    if sp > world:
        raise SacplanError(f"sp {sp} is larger than the world size {world}")
    if world % sp:
        raise SacplanError(f"sp {sp} does not divide the world size {world}")
    fsdp = all(sharded)
    if fsdp and world < 2:
        raise SacplanError("fully_shard on a single rank: FSDP needs a world size >= 2")
    if world == 1:
        return None
    return {"world_size": world, "fsdp": fsdp, "sp": sp}


def _fsdp_params(block: nn.Module) -> list:
    state = block._get_fsdp_state()  # FSDPModule's own accessor
    group = getattr(state, "_fsdp_param_group", None)
    return list(group.fsdp_params) if group is not None else []


def fsdp_block_bytes(block: nn.Module, world_size: int) -> Dict[str, int]:
    """The byte fields of a block's "fsdp" object (docs/profile_format.md).

    FSDP2 pads each parameter's first dimension to a multiple of the world
    size, so the all-gather output is world_size times the padded local
    shard (the local shard's storage), in the MixedPrecisionPolicy's
    param dtype; the reduce-scatter input likewise in its reduce dtype (the
    param dtype when unset); the gradient shard kept is in the parameter's
    own dtype."""
    unsharded = reduce_in = sharded_grad = 0
    for fsdp_param in _fsdp_params(block):
        shard = local(fsdp_param.sharded_param)
        numel = shard.untyped_storage().nbytes() // shard.element_size()
        policy = fsdp_param.mp_policy
        param_dtype = policy.param_dtype or shard.dtype
        reduce_dtype = policy.reduce_dtype or param_dtype
        unsharded += world_size * numel * param_dtype.itemsize
        reduce_in += world_size * numel * reduce_dtype.itemsize
        sharded_grad += numel * shard.element_size()
    if unsharded == 0:
        raise SacplanError("a fully_shard block has no sharded parameters")
    return {"unsharded_param_bytes": unsharded, "sharded_grad_bytes": sharded_grad,
            "reduce_scatter_bytes": reduce_in}


def root_unsharded_bytes(model: nn.Module) -> int:
    """The root module's own parameters (those fully_shard(model) groups:
    embeddings, head) unsharded, in the param dtype. FSDP2 all-gathers them
    before block 0 and keeps them until the end of backward. 0 when the
    model itself is not a fully_shard module."""
    if not _is_fsdp(model):
        return 0
    total = 0
    for fsdp_param in _fsdp_params(model):
        sharded = fsdp_param.sharded_param
        dtype = fsdp_param.mp_policy.param_dtype or local(sharded).dtype
        total += sharded.numel() * dtype.itemsize
    return total


def _works(out) -> list:
    return [leaf for leaf in tree_flatten(out)[0]
            if not isinstance(leaf, torch.Tensor) and hasattr(leaf, "wait")]


def _namespace(func) -> str:
    return getattr(func, "namespace", "")


class CollectiveSync(TorchDispatchMode):
    """Makes every collective complete before the call returns, and times
    FSDP2's all-gathers and reduce-scatters per module.

    settle: sleep briefly after each collective so the gloo worker releases
      the Work before the caller can drop the tensors (for allocation
      records; see the module docstring). Off when timing.
    mark: when given, called with a label before and after each FSDP2
      collective (AllocationLog.mark), and `fsdp_marks[(kind, fqn)]` lists
      the (begin, end) label pairs; and with BACKWARD_MARK when FSDP2's
      backward starts.
    After exit, `fsdp_ms[(kind, fqn)]` lists the milliseconds of each
    all-gather ("all_gather") or reduce-scatter ("reduce_scatter") FSDP2
    issued for the module at `fqn` (its path in the root module)."""

    def __init__(self, settle: bool, mark: Optional[Callable[[str], None]] = None):
        super().__init__()
        self.settle = settle
        self.mark = mark
        self.label: Optional[Tuple[str, str]] = None
        self.fsdp_ms: Dict[Tuple[str, str], List[float]] = defaultdict(list)
        self.fsdp_marks: Dict[Tuple[str, str], List[Tuple[str, str]]] = defaultdict(list)
        self.backward_marked = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        namespace = _namespace(func)
        if namespace == "profiler" and args and isinstance(args[0], str):
            if (args[0] == _PRE_BACKWARD and self.mark is not None
                    and not self.backward_marked):
                self.backward_marked = True
                self.mark(BACKWARD_MARK)
            match = _FSDP_LABEL.match(args[0])
            if match:
                kind = "all_gather" if match.group(1) == "all_gather" else "reduce_scatter"
                self.label = (kind, match.group(2))
            return func(*args, **kwargs)
        if namespace not in ("c10d", "_c10d_functional"):
            return func(*args, **kwargs)
        label = self.label if namespace == "c10d" else None
        marks = None
        if label is not None and self.mark is not None:
            n = len(self.fsdp_marks[label])
            marks = (f"{label[0]}:{label[1]}:{n}:begin", f"{label[0]}:{label[1]}:{n}:end")
            self.mark(marks[0])
        begin = time.perf_counter()
        out = func(*args, **kwargs)
        for work in _works(out):
            work.wait()
        if namespace == "_c10d_functional" and func.overloadpacket.__name__ != "wait_tensor":
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    torch.ops._c10d_functional.wait_tensor(t)
        elapsed_ms = (time.perf_counter() - begin) * 1e3
        if self.settle:
            time.sleep(_SETTLE_S)
        if label is not None:
            self.fsdp_ms[label].append(elapsed_ms)
            self.label = None
            if marks is not None:
                self.mark(marks[1])
                self.fsdp_marks[label].append(marks)
        return out

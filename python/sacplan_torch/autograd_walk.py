"""The autograd graph a block's forward built: which op each node belongs
to, and what the nodes keep for backward (`_saved_*`, what autograd really
keeps), mapped by storage to the op that made it, to a block input, or to a
parameter (resident anyway, not counted)."""

from __future__ import annotations

from typing import Callable, List, Optional, Tuple

import torch

from .storage import saved_tensors, storage_key
from .trace import BlockTrace


def held_before_blocks(inputs: List[torch.Tensor], input_keys: set, resident: set,
                       made_outside: set) -> Tuple[int, set]:
    """Bytes the autograd graph behind block 0's inputs keeps for its
    backward, counting only storage the step itself made: held from
    here until the embeddings' backward, after every block's. Also returns
    the storage keys counted."""
    stack = [t.grad_fn for t in inputs if t.grad_fn is not None]
    seen, counted, total = set(), set(), 0
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for saved in saved_tensors(node):
            key = storage_key(saved)
            if (key is None or key in counted or key in input_keys
                    or key in resident or key not in made_outside):
                continue
            counted.add(key)
            total += saved.untyped_storage().nbytes()
        stack.extend(fn for fn, _ in node.next_functions)
    return total, counted


def walk_block_nodes(trace: BlockTrace, outs: List[torch.Tensor],
                     visit: Callable[[object, Optional[int]], None]) -> None:
    """Calls visit(node, op index or None) for every autograd node the
    block's forward created (by sequence number), from its outputs back."""
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
        visit(node, trace.op_of_node.get(seq))
        stack.extend(fn for fn, _ in node.next_functions)


def record_saved(trace: BlockTrace, node, op_index: Optional[int], resident: set) -> None:
    """Marks what `node` keeps as needed by the backward of the op that
    owns the node or of the op that made the tensor. A tensor made outside
    the block and not passed in is not the block's."""
    for saved in saved_tensors(node):
        key = storage_key(saved)
        if key is None or key in resident or key in trace.param_keys:
            continue
        for tensor_id in trace.ids_of(saved):
            _record_need(trace, op_index, tensor_id)


def _record_need(trace: BlockTrace, op_index: Optional[int], tensor_id: str) -> None:
    producer = trace.op_at.get(tensor_id)
    if op_index is None:
        # A node no op owns (a view's): its producer keeps it.
        if producer is not None:
            trace.ops[producer].need(tensor_id)
        return
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

"""The op graph of one block as capture records it: aten calls that make new
tensors, which tensors they read, and which autograd keeps for backward."""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple

import torch


@dataclasses.dataclass
class TensorRecord:
    id: str
    bytes: int
    shape: List[int]
    dtype: str
    requires_grad: bool
    # The op after which the block's code frees it, when later than its
    # last reader (code_holds.py). None: freed after its last reader.
    held_until: Optional[str] = None

    def to_json(self) -> dict:
        doc = {"id": self.id, "bytes": self.bytes, "shape": self.shape,
               "dtype": self.dtype, "requires_grad": self.requires_grad}
        if self.held_until is not None:
            doc["held_until"] = self.held_until
        return doc


@dataclasses.dataclass
class OpRecord:
    id: str
    aten: str
    kind: str
    inputs: List[str]
    outputs: List[TensorRecord]
    fwd_ms: float = 0.0
    bwd_ms: float = 0.0
    backward_needs: List[str] = dataclasses.field(default_factory=list)
    param_bytes: int = 0
    workspace_bytes: int = 0
    bwd_workspace_bytes: int = 0
    collective: bool = False
    # PyTorch's selective checkpointing cannot cache this op's output: an
    # in-place call writes it later (or the op is that in-place call).
    never_save: bool = False
    # The call draws random numbers (naming.is_random): a recompute draws
    # the forward's numbers only under the rule of docs/memory_model.md,
    # "Random ops".
    random: bool = False
    # A weight cast autocast's cache holds until the autocast region ends
    # (naming.is_autocast_cached; docs/memory_model.md, "Autocast's weight
    # casts").
    autocast_cached: bool = False
    # Per input read only in slices (views of part of its storage): the
    # storage's bytes and the distinct slices, as (offset, shape, stride) ->
    # bytes. Absent: read whole.
    slices: Dict[str, Tuple[int, Dict[tuple, int]]] = dataclasses.field(default_factory=dict)
    # What the op costs under PyTorch's selective checkpointing, policy
    # calls included (rerun_timing.py): its forward inside checkpoint
    # unsaved and saved, its backward inside checkpoint, its re-run when
    # recomputed and when saved. None: not measured.
    checkpointed_fwd_ms: Optional[float] = None
    saved_fwd_ms: Optional[float] = None
    checkpointed_bwd_ms: Optional[float] = None
    recompute_ms: Optional[float] = None
    replay_ms: Optional[float] = None
    # On a GPU: the host's time issuing each step of the op, keyed as the
    # fields above (host_times.py). None: host and device are one clock.
    host: Optional[Dict[str, float]] = None
    # Issuing the call makes the host wait for the device (sync_ops.py).
    syncs: bool = False

    def read(self, tensor_id: str, t: Optional[torch.Tensor] = None) -> None:
        """Records that the op reads `tensor_id`, through `t` when given: a
        view of part of the tensor's storage is a slice, whose gradient
        autograd makes at the slice's size (input_grad_bytes)."""
        first = tensor_id not in self.inputs
        if first:
            self.inputs.append(tensor_id)
        if t is None:
            return
        whole = t.untyped_storage().nbytes()
        view_bytes = t.numel() * t.element_size()
        if view_bytes >= whole:
            self.slices.pop(tensor_id, None)
        elif first or tensor_id in self.slices:
            view = (t.storage_offset(), tuple(t.shape), tuple(t.stride()))
            self.slices.setdefault(tensor_id, (whole, {}))[1][view] = view_bytes

    def input_grad_bytes(self) -> Dict[str, int]:
        """Gradient bytes per input read in slices whose sizes sum to less
        than the tensor."""
        grads = {}
        for tensor_id, (whole, views) in self.slices.items():
            total = sum(views.values())
            if total < whole:
                grads[tensor_id] = total
        return grads

    def need(self, tensor_id: str) -> None:
        if tensor_id not in self.backward_needs:
            self.backward_needs.append(tensor_id)

    def to_json(self) -> dict:
        doc = {"id": self.id, "kind": self.kind, "aten": self.aten,
               "inputs": self.inputs,
               "outputs": [o.to_json() for o in self.outputs],
               "backward_needs": self.backward_needs,
               "fwd_ms": round(self.fwd_ms, 6), "bwd_ms": round(self.bwd_ms, 6),
               "workspace_bytes": self.workspace_bytes,
               "bwd_workspace_bytes": self.bwd_workspace_bytes,
               "param_bytes": self.param_bytes}
        if self.collective:
            doc["collective"] = True
        if self.never_save:
            doc["never_save"] = True
        if self.random:
            doc["random"] = True
        for field in ("checkpointed_fwd_ms", "saved_fwd_ms", "checkpointed_bwd_ms",
                      "recompute_ms", "replay_ms"):
            value = getattr(self, field)
            if value is not None:
                doc[field] = round(value, 6)
        if self.autocast_cached:
            doc["autocast_cached"] = True
        if self.host is not None:
            doc["host"] = {field: round(ms, 6) for field, ms in self.host.items()}
        if self.syncs:
            doc["syncs"] = True
        grads = self.input_grad_bytes()
        if grads:
            doc["input_grad_bytes"] = grads
        return doc


_ATTENTION = {
    "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_flash_attention_forward",
    "_efficient_attention_forward", "_scaled_dot_product_attention_math",
    "_scaled_dot_product_fused_attention_overrideable",
}
# `_grouped_mm`: a mixture of experts' expert matmuls, one call for all
# experts (Qwen3-MoE in transformers 5, TorchTitan's MoE).
_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_addmm_activation",
           "_grouped_mm"}
_ADD = {"add", "add_"}
# Functional collectives (namespace included, as aten_name writes them).
_COLLECTIVE = {
    "_c10d_functional.all_to_all_single": "all_to_all",
    "_c10d_functional.all_gather_into_tensor": "all_gather",
    "_c10d_functional.reduce_scatter_tensor": "reduce_scatter",
    "_c10d_functional.all_reduce": "all_reduce",
}


def op_kind(aten: str) -> str:
    """The planner's kind: presets key on `attention` and on matmuls
    (attn_only, torchtitan), the simulator on `add` (its backward hands the
    gradient through)."""
    if aten in _ATTENTION:
        return "attention"
    if aten in _MATMUL:
        return "mm" if aten != "addmm" else "addmm"
    if aten in _ADD:
        return "add"
    return _COLLECTIVE.get(aten, aten)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


@dataclasses.dataclass
class BlockRecord:
    index: int
    name: str
    inputs: List[dict]
    ops: List[OpRecord]
    outputs: List[str] = dataclasses.field(default_factory=list)  # one per stream
    # Under FSDP2: the block's all-gather and reduce-scatter buffers and
    # times (docs/profile_format.md).
    fsdp: Optional[dict] = None

    def to_json(self) -> dict:
        doc = {"index": self.index, "name": self.name, "inputs": self.inputs,
               "ops": [op.to_json() for op in self.ops]}
        # One stream is written as profiles always were (docs/profile_format.md).
        if len(self.outputs) == 1:
            doc["output"] = self.outputs[0]
        else:
            doc["outputs"] = self.outputs
        if self.fsdp is not None:
            doc["fsdp"] = self.fsdp
        return doc

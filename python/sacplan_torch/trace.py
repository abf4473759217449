"""One block's forward in one step, as the tracer records it."""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, Optional, Tuple

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from .boundary import PartKey, overlapping
from .graph import OpRecord, TensorRecord
from .storage import StorageKey, storage_key


class BlockTrace:
    """One block's forward in one step."""

    def __init__(self, index: int, name: str):
        self.index = index
        self.name = name
        self.inputs: List[dict] = []
        self.input_ids: Dict[StorageKey, str] = {}
        # A storage several inputs view in distinct ranges (boundary.py):
        # per storage, each part's (offset, length) and input id, sorted.
        self.input_parts: Dict[StorageKey, List[Tuple[Tuple[int, int], str]]] = {}
        self.input_keys: List[PartKey] = []   # per entry of inputs
        # The part of a storage each tensor the block returns is, in the
        # order returned (one view of a storage once);
        # streams.resolve_streams orders them into `outputs`.
        self.output_keys: List[PartKey] = []
        # The tensor id of each output part that splits an op's output.
        self.part_ids: Dict[PartKey, str] = {}
        self.tensor_of: Dict[StorageKey, str] = {}
        # Per key of tensor_of, the storage it was made for: an address
        # freed and taken by a tensor no op of the block made (a wrapped
        # Python scalar) must not read as the old tensor (id_of).
        self.made_storage: Dict[StorageKey, StorageWeakRef] = {}
        self.ops: List[OpRecord] = []
        self.op_at: Dict[str, int] = {}      # tensor id -> producing op index
        self.op_of_node: Dict[int, Optional[int]] = {}  # node sequence nr -> op index
        self.last_reader: Dict[StorageKey, Tuple[int, int]] = {}  # param -> (op, bytes)
        # The block's parameters as its forward sees them: under FSDP2 the
        # unsharded parameters it all-gathered, which are not resident.
        self.param_keys: set = set()
        # Device type -> the dtype autocast casts to and caches, for the
        # autocast regions (cache on) the block runs inside.
        self.autocast_dtypes: Dict[str, torch.dtype] = {}
        # The dtype autocast casts to on the block's device (that of its
        # first tensor argument), its cache on or off; None: autocast off.
        self.autocast_dtype: Optional[str] = None
        self.seq_start = 0
        self.last_seq = 0
        self.outputs: List[str] = []          # tensor ids, one per stream
        self.fwd_spans: Dict[str, list] = defaultdict(list)
        self.bwd_spans: Dict[str, list] = defaultdict(list)

    def made(self, key: StorageKey, tensor_id: str, t: torch.Tensor) -> None:
        """`tensor_id`, an op's output, lives in `t`'s storage under `key`."""
        self.tensor_of[key] = tensor_id
        self.made_storage[key] = StorageWeakRef(t.untyped_storage())

    def made_by_op(self, key: StorageKey) -> bool:
        """Whether the live storage under `key` is an op's output."""
        ref = self.made_storage.get(key)
        return ref is not None and not ref.expired()

    def id_of(self, key: StorageKey) -> Optional[str]:
        """The block's tensor in the live storage under `key`: an op's
        output still alive, or a block input; None otherwise."""
        if self.made_by_op(key):
            return self.tensor_of[key]
        return self.input_ids.get(key)

    def ids_of(self, t: torch.Tensor) -> List[str]:
        """The block's tensors `t` reads: id_of its storage, or the parts
        of a storage several inputs view that `t`'s range overlaps."""
        key = storage_key(t)
        if key is None:
            return []
        if key in self.input_parts and not self.made_by_op(key):
            parts = self.input_parts[key]
            return [parts[i][1] for i in overlapping([r for r, _ in parts], t)]
        found = self.id_of(key)
        return [] if found is None else [found]

    def rename_input(self, old: str, new: str) -> None:
        """Calls the input `old` `new` here and in every op that reads or
        keeps it."""
        for inp in self.inputs:
            if inp["id"] == old:
                inp["id"] = new
        for key, name in self.input_ids.items():
            if name == old:
                self.input_ids[key] = new
        for parts in self.input_parts.values():
            parts[:] = [(r, new if name == old else name) for r, name in parts]
        for op in self.ops:
            op.inputs = [new if i == old else i for i in op.inputs]
            op.backward_needs = [new if i == old else i for i in op.backward_needs]
            if old in op.slices:
                op.slices[new] = op.slices.pop(old)

    def output_id(self, part: PartKey) -> str:
        """The tensor id of a part the block returns."""
        return self.part_ids.get(part) or self.tensor_of[part]

    def split_output(self, key: StorageKey, parts: List[Tuple[PartKey, int, torch.Tensor]]
                     ) -> None:
        """Splits the op output in `key`'s storage into the parts the block
        returns (part key, bytes, a tensor viewing it), in storage order:
        the first keeps the output's id, the others are new outputs of the
        same op; every op that reads or keeps the output reads or keeps
        them all (they are one storage)."""
        whole = self.tensor_of[key]
        producer = self.ops[self.op_at[whole]]
        at = next(i for i, o in enumerate(producer.outputs) if o.id == whole)
        template = producer.outputs[at]
        records = []
        for n, (part, nbytes, view) in enumerate(parts):
            part_id = whole if n == 0 else f"{whole}.part{n}"
            self.part_ids[part] = part_id
            self.op_at[part_id] = self.op_at[whole]
            records.append(TensorRecord(
                id=part_id, bytes=nbytes, shape=list(view.shape), dtype=template.dtype,
                requires_grad=template.requires_grad, held_until=template.held_until))
        producer.outputs[at:at + 1] = records
        extra = [r.id for r in records[1:]]
        for op in self.ops:
            if whole in op.inputs:
                op.inputs.extend(i for i in extra if i not in op.inputs)
            if whole in op.backward_needs:
                op.backward_needs.extend(i for i in extra if i not in op.backward_needs)

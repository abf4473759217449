"""One block's forward in one step, as the tracer records it."""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, Optional, Tuple

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from .graph import OpRecord
from .storage import StorageKey


class BlockTrace:
    """One block's forward in one step."""

    def __init__(self, index: int, name: str):
        self.index = index
        self.name = name
        self.inputs: List[dict] = []
        self.input_ids: Dict[StorageKey, str] = {}
        self.input_keys: List[StorageKey] = []   # per entry of inputs
        # The storage of each tensor the block returns, in the order returned
        # (views of one storage once); streams.resolve_streams orders them
        # into `outputs`.
        self.output_keys: List[StorageKey] = []
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

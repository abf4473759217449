"""One block's forward in one step, as the tracer records it."""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, Optional, Tuple

import torch

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
        self.seq_start = 0
        self.last_seq = 0
        self.outputs: List[str] = []          # tensor ids, one per stream
        self.fwd_spans: Dict[str, list] = defaultdict(list)
        self.bwd_spans: Dict[str, list] = defaultdict(list)

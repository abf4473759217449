"""What crosses a block's boundary: the tensors among its arguments, however
nested, and the parts of a storage that several of them (or several of the
tensors it returns) view.

Arguments: RoPE tables come as `rotary_emb=(cos, sin)`, transformers'
`position_embeddings` as a tuple, masks and caches in dicts or dataclasses.
Every tensor among them is a block input, named by its path
(`rotary_emb.0`, `kwargs.mask`), so that what a block's backward keeps of
them is counted.

Parts: a diffusers single-stream block (Flux, HunyuanVideo) concatenates
its image and text streams, runs one stream and returns
`hidden[:, :txt_len], hidden[:, txt_len:]`: two streams that are views of
one storage. Each distinct view of such a storage (its byte range) is a
part of its own (a stream), with the bytes of its elements, the storage's
bytes no view holds going to the first part, so the parts add up to the
storage, counted once. (With a batch above 1 the two views interleave:
their ranges overlap, their elements do not.) A storage seen through one
range only (a tensor, or a view of it reshaped) is one part, the whole
storage, as before parts existed.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple, Union

import torch

from .storage import StorageKey, storage_key

# A whole storage (StorageKey), or a byte range of one viewed beside other
# ranges of it: (storage key, byte offset, byte length).
PartKey = Union[StorageKey, Tuple[StorageKey, int, int]]


def named_tensors(name: str, value, depth: int = 0) -> List[Tuple[str, torch.Tensor]]:
    """The tensors in `value` (a tensor, or tuples, lists, dicts and
    dataclasses of them, nested), each named by its path under `name`."""
    if isinstance(value, torch.Tensor):
        return [(name, value)]
    if depth > 8:
        return []
    if isinstance(value, (tuple, list)):
        items = [(str(i), v) for i, v in enumerate(value)]
    elif isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [(f.name, getattr(value, f.name, None)) for f in dataclasses.fields(value)]
    else:
        return []
    found = []
    for key, item in items:
        found += named_tensors(f"{name}.{key}", item, depth + 1)
    return found


def byte_range(t: torch.Tensor) -> Tuple[int, int]:
    """(offset, length) in bytes of the part of its storage `t` spans."""
    if t.numel() == 0:
        return t.storage_offset() * t.element_size(), 0
    span = 1 + sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))
    return t.storage_offset() * t.element_size(), span * t.element_size()


class Parts:
    """The parts of the storages a list of boundary tensors views."""

    def __init__(self, tensors: List[torch.Tensor]):
        # Per storage: each distinct range with its elements' bytes.
        self._ranges: Dict[StorageKey, Dict[Tuple[int, int], int]] = {}
        self._storage_bytes: Dict[StorageKey, int] = {}
        for t in tensors:
            key = storage_key(t)
            if key is None:
                continue
            self._ranges.setdefault(key, {})[byte_range(t)] = t.numel() * t.element_size()
            self._storage_bytes[key] = t.untyped_storage().nbytes()

    def split(self, key: StorageKey) -> bool:
        """Whether the storage under `key` is seen through several ranges."""
        return len(self._ranges.get(key, ())) > 1

    def key_of(self, t: torch.Tensor) -> Optional[PartKey]:
        key = storage_key(t)
        if key is None or not self.split(key):
            return key
        return (key, *byte_range(t))

    def bytes_of(self, part: PartKey) -> int:
        if part in self._storage_bytes:
            return self._storage_bytes[part]
        key, offset, length = part
        ranges = self._ranges[key]
        own = ranges[(offset, length)]
        if (offset, length) != min(ranges):
            return own
        return own + max(0, self._storage_bytes[key] - sum(ranges.values()))


def overlapping(ranges: List[Tuple[int, int]], t: torch.Tensor) -> List[int]:
    """The positions of the ranges that `t`'s own range overlaps (a reader
    of a view of a split storage reads the parts it spans)."""
    offset, length = byte_range(t)
    end = offset + max(length, 1)
    return [i for i, (o, n) in enumerate(ranges) if o < end and offset < o + max(n, 1)]

"""Which block inputs are streams, from what actually flows between blocks.

A double-stream block (Flux, SD3, HunyuanVideo) takes `(img, txt)` and
returns `(img, txt)`; both change in every block, so both are carried:
each block holds its own copy as a checkpoint input, and each has a
gradient per block. Text context, modulation, RoPE tables and masks are
the same tensor in every block: shared, counted once for the step.

The tracer records every tensor argument of a block by storage and every
tensor it returns; this module decides, after the recorded step:
- a tensor argument of block i+1 with the storage of one of block i's
  returned tensors (the tensor or a view of it) is carried; the order of
  block i+1's carried arguments is the stream order, and block i's
  outputs are listed in it;
- block 0's carried arguments are those with the names block 1 receives
  carried (with one block: its first k tensor arguments, k the tensors it
  returns);
- any other argument is shared, counted once for the step. A shared
  tensor block 0 got under another name (HunyuanVideo's RoPE tables are
  `freqs_cis` in its double-stream blocks and `image_rotary_emb` in its
  single-stream ones) takes block 0's name; a block whose shared tensors
  still differ from block 0's is refused here, at capture (a tensor made
  anew for each block outside the blocks, under one name, is not caught:
  it is counted once where it costs once per block).
Anything that does not match raises one SacplanError naming the block.
"""

from __future__ import annotations

from typing import List

from .errors import SacplanError
from .trace import BlockTrace


def _where(trace: BlockTrace) -> str:
    return f"blocks[{trace.index}] ({trace.name})"


def _carry_from(before: BlockTrace, after: BlockTrace) -> List[int]:
    """Marks `after`'s arguments made by `before` carried; returns, per
    stream, the position in `before`'s returned tensors."""
    positions = []
    for inp, key in zip(after.inputs, after.input_keys):
        if key in before.output_keys:
            inp["kind"] = "carried"
            positions.append(before.output_keys.index(key))
    if not positions:
        raise SacplanError(
            f"{_where(after)} receives none of the tensors {_where(before)} returns: "
            "capture needs each block's streams to be the next block's arguments")
    if len(positions) != len(before.output_keys):
        raise SacplanError(
            f"{_where(before)} returns {len(before.output_keys)} tensors but "
            f"{_where(after)} receives {len(positions)} of them: every tensor a block "
            "returns must be an argument of the next block (a stream)")
    before.outputs = [before.output_id(before.output_keys[p]) for p in positions]
    return positions


def resolve_streams(traces: List[BlockTrace]) -> None:
    """Sets each input's kind and each trace's `outputs` (see above)."""
    positions: List[int] = []
    for before, after in zip(traces, traces[1:]):
        positions = _carry_from(before, after)
    first, last = traces[0], traces[-1]
    if len(traces) == 1:
        positions = list(range(len(last.output_keys)))
        streams = first.inputs[:len(positions)]
    else:
        names = [inp["id"] for inp in traces[1].inputs if inp["kind"] == "carried"]
        by_name = {inp["id"]: inp for inp in first.inputs}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise SacplanError(
                f"{_where(first)} has no argument '{missing[0]}', which blocks[1] "
                "receives from it as a stream")
        streams = [by_name[n] for n in names]
    for inp in streams:
        inp["kind"] = "carried"
    for trace in traces[1:]:
        _align_shared(first, trace)
    if len(last.output_keys) != len(positions):
        raise SacplanError(
            f"{_where(last)} returns {len(last.output_keys)} tensors but the blocks "
            f"carry {len(positions)} streams")
    last.outputs = [last.output_id(last.output_keys[p]) for p in positions]


def _align_shared(first: BlockTrace, trace: BlockTrace) -> None:
    """Names and orders `trace`'s shared inputs as `first` does when they
    are the same tensors: HunyuanVideo's double-stream blocks take the RoPE
    tables as `freqs_cis`, its single-stream blocks as `image_rotary_emb`."""
    names = {key: inp["id"] for inp, key in zip(first.inputs, first.input_keys)
             if inp["kind"] == "shared"}
    for inp, key in zip(list(trace.inputs), trace.input_keys):
        if inp["kind"] == "shared" and key in names and inp["id"] != names[key]:
            if any(other["id"] == names[key] for other in trace.inputs):
                continue  # that name is another tensor here: the check names it
            trace.rename_input(inp["id"], names[key])
    order = {name: n for n, name in enumerate(names.values())}
    pairs = list(zip(trace.inputs, trace.input_keys))
    carried = [p for p in pairs if p[0]["kind"] != "shared"]
    shared = sorted((p for p in pairs if p[0]["kind"] == "shared"),
                    key=lambda p: order.get(p[0]["id"], len(order)))
    trace.inputs = [inp for inp, _ in carried + shared]
    trace.input_keys = [key for _, key in carried + shared]
    expected = [(inp["id"], inp["bytes"]) for inp in first.inputs if inp["kind"] == "shared"]
    got = [(inp["id"], inp["bytes"]) for inp, _ in shared]
    if got != expected:
        odd = next(iter(sorted(set(got) ^ set(expected))), None) or got[0]
        raise SacplanError(
            f"{_where(trace)} takes other step-level tensors than {_where(first)} "
            f"('{odd[0]}', {odd[1]} bytes, is not the same tensor in both): every block must "
            "read the same shared tensors, made once per step outside the blocks; pass a "
            "tensor a block makes for itself from inside it, or pass it to every block")


def stream_fingerprint(inputs: List[dict]) -> dict:
    """What model_config records of block 0's streams, for apply_plan to
    compare: one stream as capture always wrote it (carried_shape and
    carried_dtype, checked against the first tensor argument); several by
    argument name (`streams`)."""
    carried = [inp for inp in inputs if inp["kind"] == "carried"]
    if len(carried) == 1:
        return {"carried_shape": carried[0]["shape"], "carried_dtype": carried[0]["dtype"]}
    return {"streams": [{"arg": inp["id"], "shape": inp["shape"], "dtype": inp["dtype"]}
                        for inp in carried]}

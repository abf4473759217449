"""explain(model): each block's ops with what the applied plan decided.

A block the plan checkpoints saves the op ids in its `save` list for
backward and re-runs the rest in backward ("recompute"); a block it leaves
alone keeps whatever autograd keeps ("keep"). What a block's `offload` list
names is kept in host memory ("offload"). With the profile the plan was
made from (auto_checkpoint keeps it), each row carries the op's output
bytes and its forward and recompute times.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from torch import nn

from .apply import applied_to
from .errors import SacplanError, one_line


@dataclass
class OpDecision:
    block: int
    op: str
    decision: str  # "save", "recompute", "offload" or "keep"
    output_bytes: Optional[int] = None
    fwd_ms: Optional[float] = None
    recompute_ms: Optional[float] = None


@dataclass
class Explanation:
    rows: List[OpDecision]

    def __str__(self) -> str:
        lines = [f"{'block':>5}  {'op':<40} {'decision':<9} {'bytes':>12} {'fwd ms':>9} "
                 f"{'recompute ms':>12}"]
        def cell(value, fmt):
            return "-" if value is None else format(value, fmt)

        for row in self.rows:
            lines.append(f"{row.block:>5}  {one_line(row.op):<40} {row.decision:<9} "
                         f"{cell(row.output_bytes, 'd'):>12} {cell(row.fwd_ms, '.3f'):>9} "
                         f"{cell(row.recompute_ms, '.3f'):>12}")
        return "\n".join(lines)


def _decision(entry: Dict[str, Any], op_id: str) -> str:
    """`entry`: the planner's reading of a block (AppliedPlan.entries)."""
    if op_id in set(entry["offload"]):
        return "offload"
    if not entry["checkpoint"]:
        return "keep"
    return "save" if op_id in set(entry["save"]) else "recompute"


def explain(model: nn.Module) -> Explanation:
    """The decisions of the plan applied to `model` (apply_plan or
    auto_checkpoint), one row per op of every block. Raises SacplanError
    when no plan is applied."""
    applied = applied_to(model)
    if applied is None:
        raise SacplanError("explain: no plan is applied to this model "
                           "(apply_plan or auto_checkpoint first)")
    rows: List[OpDecision] = []
    profile_blocks = (applied.profile or {}).get("blocks")
    for entry in applied.entries:
        index = entry["index"]
        if profile_blocks is not None:
            for op in profile_blocks[index]["ops"]:
                rows.append(OpDecision(
                    block=index, op=op["id"], decision=_decision(entry, op["id"]),
                    output_bytes=sum(int(out.get("bytes", 0)) for out in op.get("outputs", [])),
                    fwd_ms=op.get("fwd_ms"), recompute_ms=op.get("recompute_ms")))
        else:
            for op_id in entry["save"] + entry["recompute"]:
                rows.append(OpDecision(block=index, op=op_id, decision=_decision(entry, op_id)))
    return Explanation(rows)

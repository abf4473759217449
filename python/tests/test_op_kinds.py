"""sacplan_torch names ops and dtypes by the C++ tables (planner's
op_kinds.inc and op_kinds.cc): the planner keys gradient aliasing, presets
and the calibration on these names, so a capture that spells one
differently would be planned as another op."""

from __future__ import annotations

import pathlib
import re

import torch

from sacplan_torch import graph

PLANNER = pathlib.Path(__file__).resolve().parents[2] / "planner"
ROW = re.compile(r'^SACPLAN_OP_KIND\((\w+), "(\w+)", (\w+), (\w+), (true|false)\)$')


def kind_table() -> dict:
    rows = {}
    for line in (PLANNER / "include/sacplan/planner/ir/op_kinds.inc").read_text().splitlines():
        match = ROW.match(line)
        if match:
            _, name, op_class, grad_flow, collective = match.groups()
            rows[name] = (op_class, grad_flow, collective == "true")
    return rows


def test_the_table_parses():
    rows = kind_table()
    assert rows["linear"] == ("kGemm", "kOwn", False)
    assert rows["add"] == ("kMemoryBound", "kPassesThrough", False)
    assert len(rows) > 20


def test_capture_kinds_are_the_tables():
    rows = kind_table()
    for aten in graph._MATMUL:
        assert rows[graph.op_kind(aten)][0] == "kGemm", aten
    for aten in graph._ATTENTION:
        assert rows[graph.op_kind(aten)][0] == "kAttention", aten
    for aten in graph._ADD:
        assert rows[graph.op_kind(aten)][1] == "kPassesThrough", aten
    for aten in graph._COLLECTIVE:
        assert rows[graph.op_kind(aten)][2], aten
    # Capture passes other aten names through: those the planner gives a
    # gradient flow (clone, cat, stack) must come out as their row's name.
    for name, (_, grad_flow, _) in rows.items():
        if grad_flow != "kOwn":
            assert graph.op_kind(name) == name


def test_capture_dtypes_are_the_tables():
    source = (PLANNER / "ir/op_kinds.cc").read_text()
    names = dict(re.findall(r'inline constexpr char (\w+)\[\] = "(\w+)";',
                            (PLANNER / "include/sacplan/planner/ir/op_kinds.h").read_text()))
    bytes_of = {names[constant]: int(size) for constant, size in
                re.findall(r"\{Dtype::\w+, dtype_name::(\w+), (\d+)\}", source)}
    assert len(bytes_of) == 5
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64,
                  torch.complex128):
        assert bytes_of[graph.dtype_name(dtype)] == dtype.itemsize


class _Experts(torch.nn.Module):
    """A linear, then two grouped matmuls over 2 experts of 4 tokens each,
    as a mixture of experts runs its experts (Qwen3-MoE in transformers 5
    calls `torch._grouped_mm`)."""

    def __init__(self, dim: int = 16):
        super().__init__()
        self.up = torch.nn.Linear(dim, dim)
        self.w1 = torch.nn.Parameter(torch.randn(2, dim, dim) / dim)
        self.w2 = torch.nn.Parameter(torch.randn(2, dim, dim) / dim)
        self.register_buffer("offs", torch.tensor([4, 8], dtype=torch.int32))

    def forward(self, x):
        h = torch._grouped_mm(self.up(x), self.w1, offs=self.offs)
        return x + torch._grouped_mm(torch.relu(h), self.w2, offs=self.offs)


def test_grouped_matmuls_are_matmuls_to_the_torchtitan_preset():
    import sacplan_torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(_Experts(), _Experts())
    x = torch.randn(8, 16)
    profile = sacplan_torch.capture(model, lambda m: m(x).square().mean(),
                                    blocks=list(model), warmup=0, repeats=1)
    kinds = {op["id"]: op["kind"] for op in profile["blocks"][0]["ops"]}
    assert kinds["_grouped_mm"] == kinds["_grouped_mm.1"] == "mm"
    # TorchTitan saves the 1st, 3rd, ... matmul of a block: the linear and
    # the second grouped matmul.
    plan = sacplan_torch.plan(profile, preset="torchtitan")
    for block in plan["blocks"]:
        assert {"up.addmm", "_grouped_mm.1"} <= set(block["save"])
        assert "_grouped_mm" not in block["save"]

"""capture() reads what the user's own PyTorch code does: blocks written
here, in the test, with ops no table in sacplan_torch lists."""

from __future__ import annotations

import json
import os

import pytest
import torch
from torch import nn

import sacplan_torch
from sacplan_cli import run

DIM, TOKENS = 32, 64


class Scale(torch.autograd.Function):
    """A custom autograd function that keeps an intermediate of its own."""

    @staticmethod
    def forward(ctx, x):
        doubled = x * 2
        ctx.save_for_backward(doubled)
        return doubled * 3

    @staticmethod
    def backward(ctx, grad):
        (doubled,) = ctx.saved_tensors
        return grad * 6 + doubled * 0


class NeverSeenBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(DIM, 2 * DIM)
        self.down = nn.Linear(2 * DIM, DIM)

    def forward(self, x, bias):
        h = self.up(x)                       # addmm: keeps its input
        g = torch.tanh(h)                    # tanh: keeps its output
        u = g.view(-1, 2 * DIM).transpose(0, 1).transpose(0, 1)  # views: no ops
        w = u.view_as(g) * h                 # mul: keeps both inputs
        w = Scale.apply(w)
        w.add_(bias)                         # in place: a new version of w
        return x + self.down(w)              # add: keeps nothing


class Model(nn.Module):
    def __init__(self, layers=3):
        super().__init__()
        self.embed = nn.Linear(8, DIM)
        self.bias = nn.Parameter(torch.zeros(2 * DIM))
        self.blocks = nn.ModuleList(NeverSeenBlock() for _ in range(layers))
        self.head = nn.Linear(DIM, 8)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = block(h, self.bias * 1.0)
        return self.head(h)


def make(layers=3):
    torch.manual_seed(0)
    model = Model(layers)
    batch = torch.randn(TOKENS, 8)
    return model, (lambda m: m(batch).square().mean())


@pytest.fixture(scope="module")
def profile():
    model, step = make()
    return sacplan_torch.capture(model, step, blocks="blocks",
                                 optimizer=torch.optim.AdamW(model.parameters()),
                                 name="never-seen", warmup=1, repeats=1)


def ops_by_id(block):
    return {op["id"]: op for op in block["ops"]}


def test_ids_follow_module_paths_and_aten_names(profile):
    ids = [op["id"] for op in profile["blocks"][0]["ops"]]
    assert ids == ["up.addmm", "tanh", "mul", "mul.1", "mul.2", "add_", "down.addmm", "add"]


def test_blocks_of_one_structure_get_identical_op_lists(profile):
    def strip(block):
        return [{k: v for k, v in op.items() if not k.endswith("_ms")}
                for op in block["ops"]]
    first = strip(profile["blocks"][0])
    for block in profile["blocks"][1:]:
        assert strip(block) == first


def test_backward_needs_are_what_autograd_saves(profile):
    ops = ops_by_id(profile["blocks"][0])
    assert ops["up.addmm"]["backward_needs"] == ["x"]           # the fp32 weight is resident
    assert ops["tanh"]["backward_needs"] == ["tanh.out"]        # tanh keeps its result
    assert sorted(ops["mul"]["backward_needs"]) == ["tanh.out", "up.addmm.out"]
    assert ops["add"]["backward_needs"] == []
    assert ops["add"]["kind"] == "add"
    # Scale's ctx keeps `doubled`, made by its first inner mul.
    assert ops["mul.1"]["backward_needs"] == ["mul.1.out"]


def test_views_are_not_ops_and_readers_see_the_base_tensor(profile):
    ops = ops_by_id(profile["blocks"][0])
    assert not any(name in ops for name in ("view", "transpose", "t"))
    assert ops["mul"]["inputs"] == ["tanh.out", "up.addmm.out"]


def test_in_place_writes_make_a_version_that_no_plan_may_cache(profile):
    ops = ops_by_id(profile["blocks"][0])
    assert ops["add_"]["inputs"][0] == "mul.2.out"
    assert ops["add_"]["outputs"][0]["bytes"] == ops["mul.2"]["outputs"][0]["bytes"]
    assert ops["add_"].get("never_save") and ops["mul.2"].get("never_save")
    assert not ops["mul"].get("never_save")
    assert ops["down.addmm"]["inputs"] == ["add_.out"]  # the weight and bias are resident


def test_inputs_are_named_by_the_forward_signature(profile):
    inputs = profile["blocks"][0]["inputs"]
    assert [(i["id"], i["kind"]) for i in inputs] == [("x", "carried"), ("bias", "shared")]
    assert inputs[0]["bytes"] == TOKENS * DIM * 4
    assert profile["blocks"][0]["output"] == "add.out"


def test_fixed_memory_is_the_model_and_optimizer_state(profile):
    model, _ = make()
    param_bytes = sum(p.numel() * 4 for p in model.parameters())
    assert profile["fixed"]["param_bytes"] == param_bytes
    # AdamW: exp_avg and exp_avg_sq per parameter, plus a step counter each.
    steps = len(list(model.parameters())) * 4
    assert profile["fixed"]["optimizer_state_bytes"] == 2 * param_bytes + steps
    head = sum(p.numel() * 4 for p in model.head.parameters())
    assert profile["fixed"]["nonblock_grad_bytes"] == head
    embedding = sum(p.numel() * 4 for p in model.embed.parameters()) + model.bias.numel() * 4
    assert profile["fixed"]["embedding_grad_bytes"] == embedding


def test_every_sacplan_command_reads_the_profile(profile, tmp_path):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile))
    run("plan", "--profile", str(path), "--preset", "full", "--semantics", "torch-sac",
        "-o", str(tmp_path / "plan.json"))
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["model"] == "never-seen"
    assert plan["model_config"]["blocks"] == 3


def test_a_model_without_gradients_is_refused(tmp_path):
    model, step = make()
    for p in model.parameters():
        p.requires_grad_(False)
    path = tmp_path / "p.json"
    with pytest.raises(sacplan_torch.SacplanError, match="no parameters that require gradients"):
        sacplan_torch.capture(model, step, blocks="blocks", path=str(path))
    assert not path.exists()


def test_a_block_spec_matching_nothing_is_refused():
    model, step = make()
    with pytest.raises(sacplan_torch.SacplanError, match="matches no submodule"):
        sacplan_torch.capture(model, step, blocks=lambda name, m: False)
    with pytest.raises(sacplan_torch.SacplanError, match="no submodule 'layers'"):
        sacplan_torch.capture(model, step, blocks="layers")


def test_a_block_that_does_not_run_leaves_no_file(tmp_path):
    model, _ = make()
    path = tmp_path / "p.json"
    with pytest.raises(sacplan_torch.SacplanError, match="did not run"):
        sacplan_torch.capture(model, lambda m: m.head(m.embed(torch.ones(4, 8))).sum(),
                              blocks="blocks", path=str(path), warmup=0, repeats=1)
    assert not path.exists()
    assert os.listdir(tmp_path) == []


def test_a_step_must_return_the_scalar_loss():
    model, _ = make()
    with pytest.raises(sacplan_torch.SacplanError, match="scalar loss"):
        sacplan_torch.capture(model, lambda m: m(torch.ones(4, 8)), blocks="blocks")


def test_an_example_batch_stands_for_a_step():
    model, _ = make(layers=2)
    profile = sacplan_torch.capture(model, torch.randn(16, 8), blocks="blocks",
                                    warmup=0, repeats=1)
    assert len(profile["blocks"]) == 2
    assert profile["blocks"][0]["inputs"][0]["shape"] == [16, DIM]


class FusedSplitBlock(nn.Module):
    """One linear's output cut into three parts, as a single-stream DiT cuts
    q, k, v and the MLP input out of its fused linear."""

    def __init__(self):
        super().__init__()
        self.fused = nn.Linear(DIM, 3 * DIM)
        self.down = nn.Linear(DIM, DIM)

    def forward(self, x):
        h = self.fused(x)
        a, g, v = h.split(DIM, dim=-1)
        y = a * g                            # mul: reads two slices of h
        z = torch.tanh(v)                    # tanh: reads one slice
        w = h.sum(-1, keepdim=True)          # sum: reads all of h
        return x + self.down(y + z) * w


def test_slices_of_a_fused_output_carry_their_gradient_size():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, DIM), nn.Sequential(FusedSplitBlock(), FusedSplitBlock()))
    batch = torch.randn(TOKENS, 8)
    doc = sacplan_torch.capture(model, lambda m: m(batch).square().mean(), blocks="1",
                                optimizer=torch.optim.AdamW(model.parameters()),
                                name="fused-split", warmup=1, repeats=1)
    ops = ops_by_id(doc["blocks"][0])
    slice_bytes = TOKENS * DIM * 4
    assert ops["fused.addmm"]["outputs"][0]["bytes"] == 3 * slice_bytes
    assert ops["mul"]["input_grad_bytes"] == {"fused.addmm.out": 2 * slice_bytes}
    assert ops["tanh"]["input_grad_bytes"] == {"fused.addmm.out": slice_bytes}
    assert "input_grad_bytes" not in ops["sum"]
    assert "input_grad_bytes" not in ops["down.addmm"]

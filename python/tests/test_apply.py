"""apply_plan on a model written here (one sacplan_torch has never seen).

Each block is a pre-norm transformer block: attention (LayerNorm -> qkv
Linear -> F.scaled_dot_product_attention -> out Linear) and an MLP (Linear ->
LayerNorm -> tanh GELU written with torch ops -> Linear), both with a residual.
Everything is float32 on the CPU.

What is checked:
- gradients and losses equal plain autograd's under every kind of plan;
- the policy keeps exactly the ops the plan names: counting the aten calls
  of a forward + backward shows a saved op running once and an unsaved one
  running again in the recompute;
- applying twice raises, remove() restores the block.
Every kind of bad plan or mismatch: test_apply_refusals.py.
"""

from __future__ import annotations

import gc
import json
import weakref
from collections import Counter
from typing import List

import pytest
import torch
from torch import nn

from apply_support import (DIM, HEADS, HIDDEN, IN, MATMULS, NBLOCKS, SIZES,
                           assert_same_training, attention_op_id, block_op_ids,
                           count_step, make_batch, make_net, plan_for)
from toy_transformer import Block, Net
from sacplan_torch import SacplanError, apply_plan


def test_block_op_ids_follow_module_paths():
    ids = block_op_ids(make_net().blocks[0])
    assert len(ids) == len(set(ids)), "op ids of one forward must be unique"
    for op_id in MATMULS + ["attn.norm.native_layer_norm", "mlp.norm.native_layer_norm",
                            "mlp.tanh", "mlp.mul", "mlp.mul.5", "add", "add.1"]:
        assert op_id in ids, (op_id, ids)
    assert attention_op_id().startswith("attn.")
    # Blocks of one structure get the same ids.
    assert block_op_ids(make_net().blocks[2]) == ids


# --------------------------------------------------------------------------
# Gradients equal plain autograd's.

def _plans():
    attn = attention_op_id()
    every_op = sorted(set(block_op_ids(make_net().blocks[0])))
    return {
        "full": ([], True),
        "attention_only": ([attn], True),
        "matmuls": (MATMULS, True),
        "matmuls_and_attention": (MATMULS + [attn], True),
        "every_op": (every_op, True),
        "gelu_internals": (["mlp.mul.2", "mlp.tanh", "mlp.norm.native_layer_norm"], True),
        "no_checkpoint": ([], False),
        "mixed": ([MATMULS, [], [attn, "mlp.fc1.addmm"]], [True, False, True]),
    }


@pytest.mark.parametrize("kind", list(_plans()))
def test_gradients_equal_plain_autograd(kind):
    saves, checkpoint = _plans()[kind]
    reference = make_net()
    tested = make_net()
    apply_plan(tested, plan_for(tested, saves, checkpoint=checkpoint),
               blocks="blocks", model_name="test-net")
    assert_same_training(reference, tested)


def test_blocks_in_any_order_apply_as_their_indices_say():
    """A mixed plan with its blocks listed last to first (sacplan's C++
    reader takes any order) trains as plain autograd does and leaves the
    caller's dict as it was."""
    saves, checkpoint = _plans()["mixed"]
    tested = make_net()
    plan = plan_for(tested, saves, checkpoint=checkpoint)
    plan["blocks"].reverse()
    applied = apply_plan(tested, plan, blocks="blocks", model_name="test-net")
    assert [b["index"] for b in plan["blocks"]] == [2, 1, 0]
    assert [e["save"] for e in applied.entries] == [list(s) for s in saves]
    assert_same_training(make_net(), tested)


@pytest.mark.parametrize("spec", ["path", "predicate", "modules"])
def test_block_specs_select_the_same_blocks(spec):
    tested = make_net()
    blocks = {"path": "blocks",
              "predicate": lambda name, module: isinstance(module, Block),
              "modules": list(tested.blocks)}[spec]
    applied = apply_plan(tested, plan_for(tested, [attention_op_id()]), blocks=blocks)
    assert [name for name, _ in applied.blocks] == [f"blocks.{i}" for i in range(NBLOCKS)]
    counts = count_step(tested)
    for i in range(NBLOCKS):
        assert counts[f"blocks.{i}.attn.qkv.addmm"] == 2
    assert_same_training(make_net(), tested)


class ShiftBlock(Block):
    """A block with more inputs than the carried one, as DiT blocks have
    (timestep modulation, text context): a positional scale and a keyword
    shift, both computed outside the blocks from trained parameters."""

    def forward(self, x, scale, *, shift):
        return super().forward(x * (1 + scale) + shift)


class ConditionedNet(Net):
    def __init__(self):
        super().__init__(**SIZES)
        self.blocks = nn.ModuleList(ShiftBlock(DIM, HEADS, HIDDEN) for _ in range(NBLOCKS))
        self.cond = nn.Linear(IN, 2 * DIM)

    def forward(self, x):
        scale, shift = self.cond(x.mean(1, keepdim=True)).chunk(2, dim=-1)
        h = self.embed(x)
        for block in self.blocks:
            h = block(h, scale, shift=shift)
        return self.head(h)


def test_blocks_with_extra_positional_and_keyword_inputs():
    def make():
        torch.manual_seed(0)
        return ConditionedNet()

    tested = make()
    plan = plan_for(tested, [attention_op_id(), "mlp.fc1.addmm"], block_type="ShiftBlock")
    plan["model_config"]["block_param_count"] = sum(
        p.numel() for p in tested.blocks[0].parameters())
    plan["model_config"]["param_count"] = sum(p.numel() for p in tested.parameters())
    apply_plan(tested, plan, blocks="blocks")
    counts = count_step(tested)
    assert _per_block(counts, "mlp.fc1.addmm") == [1] * NBLOCKS
    assert _per_block(counts, "attn.qkv.addmm") == [2] * NBLOCKS
    assert_same_training(make(), tested)


def test_plan_from_file(tmp_path):
    tested = make_net()
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan_for(tested, MATMULS)))
    apply_plan(tested, str(path), blocks="blocks")
    counts = count_step(tested)
    assert counts["blocks.0.attn.qkv.addmm"] == 1
    assert_same_training(make_net(), tested)


def test_first_forward_without_grad_then_training():
    """An eval forward (no_grad) before training runs the block as it is and
    does not spend the first-forward checks."""
    tested = make_net()
    apply_plan(tested, plan_for(tested, ["mlp.fc1.bmm"]), blocks="blocks")
    x, _ = make_batch()
    with torch.no_grad():
        torch.testing.assert_close(tested(x), make_net()(x), rtol=1e-5, atol=1e-7)
    with pytest.raises(SacplanError, match=r"mlp\.fc1\.bmm"):
        tested(x)


# --------------------------------------------------------------------------
# The policy saves what the plan says and recomputes the rest.

def _per_block(counts: Counter, op: str) -> List[int]:
    return [counts[f"blocks.{i}.{op}"] for i in range(NBLOCKS)]


def test_plain_model_runs_each_matmul_once():
    counts = count_step(make_net())
    for op in MATMULS:
        assert _per_block(counts, op) == [1] * NBLOCKS, op
    assert counts["embed.addmm"] == counts["head.addmm"] == 1
    assert counts[attention_op_id().split(".", 1)[1]] == NBLOCKS


def test_full_checkpointing_recomputes_every_matmul_and_attention():
    net = make_net()
    apply_plan(net, plan_for(net, []), blocks="blocks")
    counts = count_step(net)
    for op in MATMULS:
        assert _per_block(counts, op) == [2] * NBLOCKS, op
    # Outside the blocks nothing is recomputed.
    assert counts["embed.addmm"] == counts["head.addmm"] == 1
    assert counts[attention_op_id().split(".", 1)[1]] == 2 * NBLOCKS


def test_pytorch_early_stop_skips_the_unneeded_tail():
    """With PyTorch's default early stop the recompute ends once the last
    tensor backward needs is back: fc2's output feeds only the residual add,
    whose backward keeps nothing, so fc2 is not re-run even though it is not
    saved. (The torch-sac semantics in DESIGN.md counts it as recomputed.)"""
    net = make_net()
    apply_plan(net, plan_for(net, []), blocks="blocks")
    counts = count_step(net, early_stop=True)
    for op in ["attn.qkv.addmm", "attn.out.addmm", "mlp.fc1.addmm"]:
        assert _per_block(counts, op) == [2] * NBLOCKS, op
    assert _per_block(counts, "mlp.fc2.addmm") == [1] * NBLOCKS


def test_saved_attention_is_not_rerun():
    net = make_net()
    attn = attention_op_id()
    apply_plan(net, plan_for(net, [attn]), blocks="blocks")
    for early_stop in (False, True):
        counts = count_step(net, early_stop)
        assert counts[attn.split(".", 1)[1]] == NBLOCKS, early_stop
        for op in ["attn.qkv.addmm", "attn.out.addmm", "mlp.fc1.addmm"]:
            assert _per_block(counts, op) == [2] * NBLOCKS, (op, early_stop)


def test_saved_matmuls_are_not_rerun():
    net = make_net()
    apply_plan(net, plan_for(net, MATMULS), blocks="blocks")
    counts = count_step(net)
    for op in MATMULS:
        assert _per_block(counts, op) == [1] * NBLOCKS, op
    assert counts[attention_op_id().split(".", 1)[1]] == 2 * NBLOCKS


def test_save_lists_land_on_their_own_block_and_op():
    net = make_net()
    saves = [["attn.qkv.addmm"], ["mlp.fc1.addmm", "attn.out.addmm"], ["mlp.fc2.addmm"]]
    apply_plan(net, plan_for(net, saves), blocks="blocks")
    counts = count_step(net)
    for i, saved in enumerate(saves):
        for op in MATMULS:
            expected = 1 if op in saved else 2
            assert counts[f"blocks.{i}.{op}"] == expected, (i, op)


def test_repeat_index_names_one_call():
    """`mlp.mul.2` is the third aten.mul of the MLP: saving it removes
    exactly one mul per block from the recompute."""
    full = make_net()
    apply_plan(full, plan_for(full, []), blocks="blocks")
    one = make_net()
    apply_plan(one, plan_for(one, ["mlp.mul.2"]), blocks="blocks")
    assert count_step(full)["mul"] - count_step(one)["mul"] == NBLOCKS


def test_checkpoint_false_blocks_are_not_recomputed():
    net = make_net()
    apply_plan(net, plan_for(net, [], checkpoint=[False, True, False]), blocks="blocks")
    counts = count_step(net)
    for op in MATMULS:
        assert _per_block(counts, op) == [1, 2, 1], op
    assert "forward" not in vars(net.blocks[0])
    assert "forward" in vars(net.blocks[1])


def test_remove_restores_plain_autograd():
    net = make_net()
    plain = count_step(make_net())
    applied = apply_plan(net, plan_for(net, []), blocks="blocks")
    assert count_step(net) != plain
    applied.remove()
    for block in net.blocks:
        assert "forward" not in vars(block)
        assert not block._forward_pre_hooks and not block._forward_hooks
        for module in block.modules():
            assert not module._forward_pre_hooks and not module._forward_hooks
    assert count_step(net) == plain
    # A plan can be applied again after remove().
    apply_plan(net, plan_for(net, MATMULS), blocks="blocks")
    assert _per_block(count_step(net), "attn.qkv.addmm") == [1] * NBLOCKS


def test_a_model_with_a_plan_is_freed_when_dropped():
    # apply_plan remembers each model's plan for explain(); that must not
    # keep a model (its parameters, gradients and optimizer state) alive
    # once the trainer drops it, or a later step measures or holds its bytes.
    net = make_net()
    applied = apply_plan(net, plan_for(net, MATMULS), blocks="blocks")
    count_step(net)
    dropped = weakref.ref(net)
    del net, applied
    gc.collect()
    assert dropped() is None


def test_applying_twice_raises():
    net = make_net()
    apply_plan(net, plan_for(net, []), blocks="blocks")
    with pytest.raises(SacplanError, match=r"blocks\[0\] \(blocks\.0\): a plan is already applied"):
        apply_plan(net, plan_for(net, MATMULS), blocks="blocks")
    # The failed second apply left the first in place.
    assert _per_block(count_step(net), "attn.qkv.addmm") == [2] * NBLOCKS


# --------------------------------------------------------------------------
# Errors.

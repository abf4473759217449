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
- every kind of bad plan or mismatch raises SacplanError naming the problem;
- applying twice raises, remove() restores the block.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Dict, List

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import set_checkpoint_early_stop
from torch.utils._python_dispatch import TorchDispatchMode

import toy_transformer
from toy_transformer import Block, Net

from sacplan_torch import SacplanError, apply_plan
from sacplan_torch.naming import OpNamer, aten_name, is_named

DIM, HEADS, HIDDEN = 16, 2, 32
BATCH, TOKENS, IN, OUT = 2, 8, 8, 4
NBLOCKS = 3


SIZES = dict(dim=DIM, heads=HEADS, hidden=HIDDEN, blocks=NBLOCKS, inputs=IN, outputs=OUT)


def make_net() -> Net:
    return toy_transformer.make_net(**SIZES)


def make_batch(batch: int = BATCH):
    g = torch.Generator().manual_seed(1)
    return (torch.randn(batch, TOKENS, IN, generator=g),
            torch.randn(batch, TOKENS, OUT, generator=g))


def loss_of(net: nn.Module, x, y) -> torch.Tensor:
    return (net(x) - y).square().mean()


MATMULS = ["attn.qkv.addmm", "attn.out.addmm", "mlp.fc1.addmm", "mlp.fc2.addmm"]


class _Naming(TorchDispatchMode):
    def __init__(self, namer: OpNamer):
        super().__init__()
        self.namer = namer
        self.ids: List[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if is_named(func):
            self.ids.append(self.namer.name(func))
        return func(*args, **(kwargs or {}))


def block_op_ids(block: nn.Module) -> List[str]:
    """The op ids of one forward of `block`, named as apply_plan names them."""
    namer = OpNamer(block)
    mode = _Naming(namer)
    x = torch.randn(BATCH, TOKENS, DIM, requires_grad=True)
    try:
        with mode:
            block(x)
    finally:
        namer.remove()
    return mode.ids


def attention_op_id() -> str:
    ids = [i for i in block_op_ids(make_net().blocks[0]) if "scaled_dot_product" in i]
    assert len(ids) == 1, ids
    return ids[0]


def plan_for(net: nn.Module, saves, *, checkpoint=True, **config) -> Dict:
    """A sacplan.plan/1 dict; `saves` is one save list for every block or a
    list of them; `checkpoint` one bool or a list of them."""
    if saves and isinstance(saves[0], str) or not saves:
        saves = [list(saves)] * NBLOCKS
    if isinstance(checkpoint, bool):
        checkpoint = [checkpoint] * NBLOCKS
    model_config = {
        "framework": "pytorch",
        "blocks": NBLOCKS,
        "block_type": "Block",
        "block_param_count": sum(p.numel() for p in net.blocks[0].parameters()),
        "param_count": sum(p.numel() for p in net.parameters()),
        "carried_shape": [BATCH, TOKENS, DIM],
        "carried_dtype": "float32",
    }
    model_config.update(config)
    return {
        "schema": "sacplan.plan/1",
        "model": "test-net",
        "semantics": "torch-sac",
        "model_config": model_config,
        "blocks": [{"index": i, "save": list(s), "checkpoint": c}
                   for i, (s, c) in enumerate(zip(saves, checkpoint))],
    }


class OpCounter(TorchDispatchMode):
    """Counts the aten calls that really run. `addmm` calls are counted per
    Linear (found by their bias, the addmm's first argument), e.g.
    `blocks.1.mlp.fc1.addmm`; every other call by its aten name."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.counts: Counter = Counter()
        self._linears = {m.bias.data_ptr(): name for name, m in net.named_modules()
                         if isinstance(m, nn.Linear)}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = aten_name(func)
        if name == "addmm":
            name = self._linears.get(args[0].data_ptr(), "?") + ".addmm"
        self.counts[name] += 1
        return func(*args, **(kwargs or {}))


def count_step(net: nn.Module, early_stop: bool = False) -> Counter:
    """Aten calls of one forward + backward. With early_stop=False every
    unsaved op of a checkpointed block is re-run in backward (the torch-sac
    semantics of docs); PyTorch's default stops the recompute once the
    last tensor backward needs is back."""
    x, y = make_batch()
    net.zero_grad(set_to_none=True)
    counter = OpCounter(net)
    with set_checkpoint_early_stop(early_stop), counter:
        loss_of(net, x, y).backward()
    return counter.counts


def grads_of(net: nn.Module) -> Dict[str, torch.Tensor]:
    return {name: p.grad.detach().clone() for name, p in net.named_parameters()}


def assert_same_training(reference: nn.Module, tested: nn.Module, steps: int = 2) -> None:
    """Losses and every gradient of `steps` SGD steps agree within 1e-5."""
    x, y = make_batch()
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.1)
    opt_test = torch.optim.SGD(tested.parameters(), lr=0.1)
    for step in range(steps):
        for net, opt in ((reference, opt_ref), (tested, opt_test)):
            opt.zero_grad(set_to_none=True)
            net.loss = loss_of(net, x, y)
            net.loss.backward()
        torch.testing.assert_close(tested.loss, reference.loss, rtol=1e-5, atol=0,
                                   msg=lambda m: f"step {step} loss: {m}")
        ref_grads, test_grads = grads_of(reference), grads_of(tested)
        assert ref_grads.keys() == test_grads.keys()
        for name in ref_grads:
            assert torch.count_nonzero(ref_grads[name]) > 0, name
            torch.testing.assert_close(test_grads[name], ref_grads[name],
                                       rtol=1e-5, atol=1e-7,
                                       msg=lambda m: f"step {step} grad of {name}: {m}")
        opt_ref.step()
        opt_test.step()


# --------------------------------------------------------------------------
# The test model's op ids are what naming.py promises.

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


def test_applying_twice_raises():
    net = make_net()
    apply_plan(net, plan_for(net, []), blocks="blocks")
    with pytest.raises(SacplanError, match=r"blocks\[0\] \(blocks\.0\): a plan is already applied"):
        apply_plan(net, plan_for(net, MATMULS), blocks="blocks")
    # The failed second apply left the first in place.
    assert _per_block(count_step(net), "attn.qkv.addmm") == [2] * NBLOCKS


# --------------------------------------------------------------------------
# Errors.

def _fails_at_apply(plan, match, blocks="blocks", model_name=None):
    net = make_net()
    with pytest.raises(SacplanError, match=match):
        apply_plan(net, plan, blocks=blocks, model_name=model_name)
    # Nothing was changed.
    for block in net.blocks:
        assert "forward" not in vars(block)
        for module in block.modules():
            assert not module._forward_pre_hooks and not module._forward_hooks


def test_plan_for_another_block_count():
    plan = plan_for(make_net(), [])
    plan["blocks"] = plan["blocks"][:2]
    _fails_at_apply(plan, r"plan has 2 blocks, the model has 3")


def test_plan_for_another_param_count():
    plan = plan_for(make_net(), [], param_count=12345)
    _fails_at_apply(plan, r"model_config\.param_count is 12345, this model has \d+")


def test_plan_for_another_block_type_and_size():
    _fails_at_apply(plan_for(make_net(), [], block_type="WanAttentionBlock"),
                    r"model_config\.block_type is 'WanAttentionBlock', this model has 'Block'")
    _fails_at_apply(plan_for(make_net(), [], block_param_count=7),
                    r"model_config\.block_param_count is 7")


def test_block_type_of_a_sharded_block_is_its_own():
    """fully_shard swaps a block's class for `FSDP<Class>(FSDPModule, Class)`
    (test_fsdp.py shards for real); the plan's block_type still matches."""
    from torch.distributed.fsdp import FSDPModule

    net = make_net()
    sharded_cls = type("FSDPBlock", (FSDPModule, Block), {})
    for block in net.blocks:
        block.__class__ = sharded_cls
    apply_plan(net, plan_for(net, []), blocks="blocks")
    # A user class that merely looks alike keeps its name.
    other = make_net()
    lookalike = type("FSDPBlock", (nn.Identity, Block), {})
    for block in other.blocks:
        block.__class__ = lookalike
    with pytest.raises(SacplanError, match=r"block_type is 'Block', this model has 'FSDPBlock'"):
        apply_plan(other, plan_for(other, []), blocks="blocks")


def test_plan_for_another_model_name():
    _fails_at_apply(plan_for(make_net(), []), r"plan is for model 'test-net', not 'other'",
                    model_name="other")


def test_op_id_naming_a_missing_submodule():
    saves = [[], ["mlp.fc3.addmm"], []]
    _fails_at_apply(plan_for(make_net(), saves),
                    r"blocks\[1\]\.save names op 'mlp\.fc3\.addmm', but the block has no "
                    r"submodule 'mlp\.fc3'")


@pytest.mark.parametrize("bad", ["mlp.fc1.bmm", "mlp.mul.99", "softmax"])
def test_op_id_the_block_never_runs(bad):
    net = make_net()
    saves = [[], [], ["attn.qkv.addmm", bad]]
    apply_plan(net, plan_for(net, saves), blocks="blocks")  # fine until it runs
    x, _ = make_batch()
    with pytest.raises(SacplanError,
                       match=rf"blocks\[2\]\.save names op ids the block does not run: "
                             rf"{bad.replace('.', '[.]')}$"):
        net(x)


def test_carried_input_of_another_shape():
    net = make_net()
    apply_plan(net, plan_for(net, []), blocks="blocks")
    x, _ = make_batch(batch=BATCH + 1)
    with pytest.raises(SacplanError,
                       match=r"plan is for another shape: blocks take \[2, 8, 16\] in its "
                             r"profile, \[3, 8, 16\] here"):
        net(x)


def test_carried_input_of_another_dtype():
    net = make_net()
    apply_plan(net, plan_for(net, [], carried_dtype="bfloat16"), blocks="blocks")
    x, _ = make_batch()
    with pytest.raises(SacplanError, match=r"another dtype.*bfloat16.*float32"):
        net(x)


def test_block_path_that_does_not_exist():
    _fails_at_apply(plan_for(make_net(), []), r"model has no submodule 'layers'",
                    blocks="layers")


def test_block_predicate_matching_nothing():
    _fails_at_apply(plan_for(make_net(), []), r"predicate matches no submodule",
                    blocks=lambda name, module: isinstance(module, nn.Conv2d))


def test_block_list_with_a_foreign_module():
    _fails_at_apply(plan_for(make_net(), []), r"not a submodule of the model",
                    blocks=[nn.Linear(2, 2)])


def _malformed():
    good = plan_for(make_net(), [])

    def edit(fn):
        plan = json.loads(json.dumps(good))
        fn(plan)
        return plan

    return {
        "no_schema": (edit(lambda p: p.pop("schema")), r"schema must be 'sacplan\.plan/1'"),
        "other_schema": (edit(lambda p: p.update(schema="sacplan.profile/1")),
                         r"schema must be 'sacplan\.plan/1'"),
        "no_blocks": (edit(lambda p: p.pop("blocks")), r"blocks must be a non-empty list"),
        "empty_blocks": (edit(lambda p: p.update(blocks=[])), r"blocks must be a non-empty list"),
        "blocks_not_list": (edit(lambda p: p.update(blocks={"0": {}})),
                            r"blocks must be a non-empty list"),
        "save_not_list": (edit(lambda p: p["blocks"][1].update(save="attn.qkv.addmm")),
                          r"blocks\[1\]\.save must be a list of op ids"),
        "save_missing": (edit(lambda p: p["blocks"][2].pop("save")),
                         r"blocks\[2\]\.save must be a list of op ids"),
        "save_not_strings": (edit(lambda p: p["blocks"][0].update(save=[3])),
                             r"blocks\[0\]\.save must be a list of op ids"),
        "bad_index": (edit(lambda p: p["blocks"][1].update(index=2)),
                      r"blocks\[1\]\.index must be 1"),
        "bad_checkpoint": (edit(lambda p: p["blocks"][0].update(checkpoint="yes")),
                           r"blocks\[0\]\.checkpoint must be true or false"),
        "bad_model_config": (edit(lambda p: p.update(model_config=[1])),
                             r"model_config must be an object"),
    }


@pytest.mark.parametrize("kind", list(_malformed()))
def test_malformed_plan(kind, tmp_path):
    plan, match = _malformed()[kind]
    _fails_at_apply(plan, match)
    # The same plan read from a file fails the same way.
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    _fails_at_apply(str(path), match)


def test_plan_that_is_not_an_object(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps([plan_for(make_net(), [])]))
    _fails_at_apply(str(path), r"schema must be 'sacplan\.plan/1'")
    _fails_at_apply([plan_for(make_net(), [])], r"plan: expected a file path or a dict, not list")


def test_plan_file_that_is_not_json(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text('{"schema": "sacplan.plan/1", "blocks": [')
    _fails_at_apply(str(path), rf"plan {path}: not JSON \(.* at line 1\)")


def test_missing_plan_file(tmp_path):
    path = tmp_path / "nowhere.json"
    _fails_at_apply(str(path), rf"plan {path}: cannot read \(No such file or directory\)")
    _fails_at_apply(path, r"cannot read")


def test_plan_for_other_semantics_warns():
    net = make_net()
    plan = plan_for(net, [])
    plan["semantics"] = "sacplan"
    with pytest.warns(UserWarning, match=r"'sacplan' semantics"):
        apply_plan(net, plan, blocks="blocks")

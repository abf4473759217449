"""apply_plan refuses every kind of bad plan or mismatch with one
SacplanError naming the problem, and leaves the model as it was (the toy
model of apply_support.py)."""

from __future__ import annotations

import json

import pytest
from torch import nn

from apply_support import BATCH, make_batch, make_net, plan_for
from toy_transformer import Block
from sacplan_torch import SacplanError, apply_plan


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
    _fails_at_apply(plan, r"model_config\.param_count is 12345 in the plan, \d+ in this model")


def test_plan_for_another_block_type_and_size():
    _fails_at_apply(plan_for(make_net(), [], block_type="WanAttentionBlock"),
                    r'model_config\.block_type is "WanAttentionBlock" in the plan, "Block" in this model')
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
    with pytest.raises(SacplanError, match=r'block_type is "Block" in the plan, "FSDPBlock" in this'):
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
        "no_schema": (edit(lambda p: p.pop("schema")), r"schema: missing"),
        "other_schema": (edit(lambda p: p.update(schema="sacplan.profile/1")),
                         r'schema: expected "sacplan\.plan/1" or "sacplan\.plan/2", '
                         r'got "sacplan\.profile/1"'),
        "no_blocks": (edit(lambda p: p.pop("blocks")), r"blocks: missing"),
        "empty_blocks": (edit(lambda p: p.update(blocks=[])), r"blocks: empty: a plan has one entry per block"),
        "blocks_not_list": (edit(lambda p: p.update(blocks={"0": {}})),
                            r"blocks: expected an array, got object"),
        "save_not_list": (edit(lambda p: p["blocks"][1].update(save="attn.qkv.addmm")),
                          r"blocks\[1\]\.save: expected an array, got string"),
        "save_missing": (edit(lambda p: p["blocks"][2].pop("save")),
                         r"blocks\[2\]\.save: missing"),
        "save_not_strings": (edit(lambda p: p["blocks"][0].update(save=[3])),
                             r"blocks\[0\]\.save\[0\]: expected a string, got number"),
        "bad_index": (edit(lambda p: p["blocks"][1].update(index=2)),
                      r"blocks\[2\]\.index: 2 is out of range or repeated \(the plan has 3 blocks\)"),
        "index_not_int": (edit(lambda p: p["blocks"][1].update(index="1")),
                          r"blocks\[1\]\.index: expected an integer, got string"),
        "bad_checkpoint": (edit(lambda p: p["blocks"][0].update(checkpoint="yes")),
                           r"blocks\[0\]\.checkpoint: expected true or false, got string"),
        "bad_model_config": (edit(lambda p: p.update(model_config=[1])),
                             r"model_config: expected an object, got array"),
        # Offload (sacplan.plan/2): an op of a submodule the block lacks;
        # under /1 an offload list is refused by the reader itself.
        "offload_unknown_op": (edit(lambda p: (p.update(schema="sacplan.plan/2"),
                                               p["blocks"][0].update(offload=["nosuch.addmm"]))),
                               r"blocks\[0\]\.offload names op 'nosuch\.addmm', but the block "
                               r"has no submodule 'nosuch'"),
        "offload_in_schema_1": (edit(lambda p: p["blocks"][0].update(offload=["x"])),
                                r'blocks\[0\]\.offload: needs schema "sacplan\.plan/2"'),
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
    _fails_at_apply(str(path), r"plan: expected an object, got array")
    _fails_at_apply([plan_for(make_net(), [])], r"plan: expected a file path or a dict, not list")


def test_plan_file_that_is_not_json(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text('{"schema": "sacplan.plan/1", "blocks": [')
    _fails_at_apply(str(path), rf"{path}: not valid JSON \(malformed or truncated\) near byte")


def test_missing_plan_file(tmp_path):
    path = tmp_path / "nowhere.json"
    _fails_at_apply(str(path), rf"cannot read {path}: No such file or directory")
    _fails_at_apply(path, r"cannot read")


def test_plan_for_other_semantics_warns():
    net = make_net()
    plan = plan_for(net, [])
    plan["semantics"] = "sacplan"
    with pytest.warns(UserWarning, match=r"'sacplan' semantics"):
        apply_plan(net, plan, blocks="blocks")


def test_a_plan_without_semantics_reads_as_sacplan_and_warns():
    """As the C++ reader (and docs/plan_format.md) has it: no `semantics`
    means sacplan, which is not how apply_plan applies a plan."""
    net = make_net()
    plan = plan_for(net, [])
    del plan["semantics"]
    with pytest.warns(UserWarning, match=r"'sacplan' semantics \(it names none"):
        apply_plan(net, plan, blocks="blocks")

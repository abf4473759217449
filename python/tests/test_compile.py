"""apply_plan and capture with torch.compile, on the model written in
toy_transformer.py (float32, CPU).

What is checked (docs/python.md, "torch.compile"):
- a checkpointed block that is compiled, by `torch.compile(block)` or
  `block.compile()`, before or after apply_plan, is refused with one
  SacplanError; compiled blocks the plan leaves alone (`checkpoint: false`)
  train like eager ones;
- a block that calls a compiled function (its attention) trains under
  every kind of plan like plain eager autograd, and the policy sees the
  function's aten calls by the op ids capture gives them;
- capture refuses a compiled block and reads its `_orig_mod`.
Compiles use backend="aot_eager" (AOTAutograd without inductor: what the
policy and the checkpoint see is the same) except one inductor run.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.testing import CompileCounterWithBackend

import toy_transformer
from apply_support import (MATMULS, assert_same_training, attention_op_id, block_op_ids,
                           count_step, loss_of, make_batch, make_net, plan_for)
from sacplan_torch import SacplanError, apply_plan, capture

ATTENTION_KERNEL = "_scaled_dot_product_flash_attention_for_cpu"


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _compile_blocks(net, how: str, backend="aot_eager", **options) -> None:
    for i, block in enumerate(list(net.blocks)):
        if how == "wrap":
            net.blocks[i] = torch.compile(block, backend=backend, **options)
        else:
            block.compile(backend=backend, **options)


def _grads(net):
    return {name.replace("._orig_mod", ""): p.grad.detach().clone()
            for name, p in net.named_parameters()}


# --------------------------------------------------------------------------
# Compiled blocks.

def test_compiled_blocks_left_alone_train_like_eager():
    counter = CompileCounterWithBackend("aot_eager")
    reference, net = make_net(), make_net()
    _compile_blocks(net, "wrap", backend=counter)
    apply_plan(net, plan_for(net, [], checkpoint=False), blocks="blocks")
    x, y = make_batch()
    for model in (reference, net):
        loss_of(model, x, y).backward()
    assert counter.frame_count >= 1, "the blocks did not run compiled"
    expected, got = _grads(reference), _grads(net)
    assert expected.keys() == got.keys()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("how", ["wrap", "inplace"])
@pytest.mark.parametrize("saves", [[], MATMULS], ids=["full", "partial"])
def test_compiled_checkpointed_block_is_refused(how, saves):
    net = make_net()
    _compile_blocks(net, how)
    pattern = r"blocks\[0\] \(blocks\.0\) is compiled .*uncompiled"
    with pytest.raises(SacplanError, match=pattern):
        apply_plan(net, plan_for(net, saves), blocks="blocks")
    # Only the checkpointed block is refused.
    with pytest.raises(SacplanError, match=r"^blocks\[1\] \(blocks\.1\) is compiled"):
        apply_plan(net, plan_for(net, saves, checkpoint=[False, True, False]),
                   blocks="blocks")


def test_orig_mod_of_a_compiled_block_is_refused():
    net = make_net()
    _compile_blocks(net, "wrap")
    with pytest.raises(SacplanError, match=r"blocks\.0\._orig_mod\) is compiled"):
        apply_plan(net, plan_for(net, MATMULS),
                   blocks=[block._orig_mod for block in net.blocks])


@pytest.mark.parametrize("how, fullgraph", [("wrap", False), ("wrap", True),
                                            ("inplace", False)])
def test_block_compiled_after_apply_plan_is_refused(how, fullgraph):
    net = make_net()
    apply_plan(net, plan_for(net, MATMULS), blocks="blocks")
    _compile_blocks(net, how, fullgraph=fullgraph)
    x, y = make_batch()
    with pytest.raises(SacplanError, match=r"blocks\[0\] \(blocks\.0\) is compiled"):
        loss_of(net, x, y)


# --------------------------------------------------------------------------
# A compiled function inside a block.

class CompiledAttention(toy_transformer.Attention):
    """The test model's attention calling a compiled SDPA, as a block with
    flex attention does."""

    sdpa = None

    def forward(self, x):
        b, t, d = x.shape
        qkv = self.qkv(self.norm(x)).view(b, t, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        return self.out(self.sdpa(q, k, v).transpose(1, 2).reshape(b, t, d))


def _net_with_compiled_attention(backend):
    CompiledAttention.sdpa = staticmethod(torch.compile(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v), backend=backend))
    net = make_net()
    for block in net.blocks:
        block.attn.__class__ = CompiledAttention
    return net


def test_compiled_attention_keeps_the_op_ids():
    net = _net_with_compiled_attention("aot_eager")
    assert block_op_ids(net.blocks[0]) == block_op_ids(make_net().blocks[0])


@pytest.mark.parametrize("plan, attention_runs", [
    ("none", 3), ("full", 6), ("partial", 3)])
def test_compiled_attention_inside_blocks_trains_like_eager(plan, attention_runs):
    counter = CompileCounterWithBackend("aot_eager")
    net = _net_with_compiled_attention(counter)
    saves = {"none": [], "full": [], "partial": MATMULS + [attention_op_id()]}[plan]
    apply_plan(net, plan_for(net, saves, checkpoint=plan != "none"), blocks="blocks")
    assert_same_training(make_net(), net)
    assert counter.frame_count >= 1
    # A saved attention runs once per block; a recomputed one twice.
    assert count_step(net)[ATTENTION_KERNEL] == attention_runs


def test_inductor_compiled_attention_under_a_partial_plan():
    net = _net_with_compiled_attention("inductor")
    apply_plan(net, plan_for(net, MATMULS + [attention_op_id()]), blocks="blocks")
    assert_same_training(make_net(), net, steps=1)


# --------------------------------------------------------------------------
# Capture.

@pytest.mark.parametrize("how", ["wrap", "inplace"])
def test_capture_refuses_a_compiled_block(how):
    net = make_net()
    _compile_blocks(net, how)
    x, y = make_batch()
    with pytest.raises(SacplanError, match=r"is compiled .*blocks=\[b\._orig_mod"):
        capture(net, lambda model: loss_of(model, x, y), blocks="blocks")


def test_capture_reads_the_orig_mod_of_compiled_blocks():
    net = make_net()
    _compile_blocks(net, "wrap")
    x, y = make_batch()
    doc = capture(net, lambda model: loss_of(model, x, y),
                  blocks=[block._orig_mod for block in net.blocks], warmup=0, repeats=1)
    assert doc["model"]["config"]["block_type"] == "Block"
    ids = [op["id"] for op in doc["blocks"][0]["ops"]]
    assert set(MATMULS + [attention_op_id()]) <= set(ids)

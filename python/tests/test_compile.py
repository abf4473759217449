"""apply_plan and capture with torch.compile, on the model written in
toy_transformer.py (float32, CPU).

What is checked (docs/python.md, "torch.compile"):
- blocks compiled by `torch.compile(block)` (as TorchTitan does) or
  `block.compile()`, before or after apply_plan, with fullgraph=True, train
  like plain eager autograd under every kind of plan, and the compiled
  backward recomputes the calls the plan recomputes and no others; a plan
  naming an op id the block does not run is refused while compiling;
- a block that calls a compiled function (its attention) trains under
  every kind of plan like plain eager autograd, and the policy sees the
  function's aten calls by the op ids capture gives them;
- capture refuses a compiled block and reads its `_orig_mod`.
Compiles use backend="aot_eager" (AOTAutograd without inductor: the policy
sees the same calls, before inductor's decompositions) except two inductor
runs.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd
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

def _assert_same_grads(reference, net) -> None:
    """One step of each; losses and gradients agree within 1e-5."""
    x, y = make_batch()
    losses = [loss_of(model, x, y) for model in (reference, net)]
    for loss in losses:
        loss.backward()
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-5, atol=0)
    expected, got = _grads(reference), _grads(net)
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.count_nonzero(expected[name]) > 0, name
        torch.testing.assert_close(got[name], expected[name], rtol=1e-5, atol=1e-7,
                                   msg=lambda m: f"grad of {name}: {m}")


def test_compiled_blocks_left_alone_train_like_eager():
    counter = CompileCounterWithBackend("aot_eager")
    net = make_net()
    _compile_blocks(net, "wrap", backend=counter)
    apply_plan(net, plan_for(net, [], checkpoint=False), blocks="blocks")
    _assert_same_grads(make_net(), net)
    assert counter.frame_count >= 1, "the blocks did not run compiled"


@pytest.mark.parametrize("how", ["wrap", "inplace"])
@pytest.mark.parametrize("order", ["compile_first", "apply_first"])
@pytest.mark.parametrize("saves", [[], MATMULS], ids=["full", "partial"])
def test_compiled_blocks_train_like_eager_under_a_plan(how, order, saves):
    counter = CompileCounterWithBackend("aot_eager")
    net = make_net()
    if order == "compile_first":
        _compile_blocks(net, how, backend=counter, fullgraph=True)
    apply_plan(net, plan_for(net, saves), blocks="blocks")
    if order == "apply_first":
        _compile_blocks(net, how, backend=counter, fullgraph=True)
    _assert_same_grads(make_net(), net)
    # One whole graph per block: the checkpoint and its policy compiled.
    assert counter.frame_count == len(net.blocks)


def test_whole_model_compiled_trains_like_eager():
    counter = CompileCounterWithBackend("aot_eager")
    net = make_net()
    apply_plan(net, plan_for(net, MATMULS + [attention_op_id()]), blocks="blocks")
    compiled = torch.compile(net, backend=counter, fullgraph=True)
    reference = make_net()
    x, y = make_batch()
    loss_of(compiled, x, y).backward()
    loss_of(reference, x, y).backward()
    assert counter.frame_count == 1
    for (name, p), q in zip(net.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-7, msg=name)


def _backward_graph_ops(saves):
    graphs = []

    def keep_backward(graph, inputs):
        graphs.append(graph)
        return make_boxed_func(graph.forward)

    backend = aot_autograd(fw_compiler=lambda graph, inputs: make_boxed_func(graph.forward),
                           bw_compiler=keep_backward)
    net = make_net()
    apply_plan(net, plan_for(net, saves), blocks="blocks")
    _compile_blocks(net, "wrap", backend=backend, fullgraph=True)
    x, y = make_batch()
    loss_of(net, x, y).backward()
    return Counter(node.target.overloadpacket.__name__ for node in graphs[0].graph.nodes
                   if node.op == "call_function" and hasattr(node.target, "overloadpacket"))


def test_compiled_backward_recomputes_what_the_plan_recomputes():
    full, partial = _backward_graph_ops([]), _backward_graph_ops(MATMULS)
    # Recomputed: qkv, out and fc1 (fc2's output feeds only a sum).
    assert full["addmm"] == 3
    assert partial["addmm"] == 0
    # The GELU's tanh is recomputed under both plans.
    assert full["tanh"] == partial["tanh"] == 1


def test_compiled_block_checks_the_plans_op_ids():
    net = make_net()
    apply_plan(net, plan_for(net, ["attn.qkv.addmm.7"]), blocks="blocks")
    _compile_blocks(net, "wrap", fullgraph=True)
    x, y = make_batch()
    # Raised while AOTAutograd traces, so dynamo wraps it in its own error.
    with pytest.raises(Exception, match=r"SacplanError: plan: blocks\[0\]\.save names op "
                                        r"ids the block does not run: attn\.qkv\.addmm\.7"):
        loss_of(net, x, y)


def test_inductor_compiled_blocks_under_a_partial_plan():
    net = make_net()
    apply_plan(net, plan_for(net, MATMULS + [attention_op_id()]), blocks="blocks")
    _compile_blocks(net, "wrap", backend="inductor", fullgraph=True)
    _assert_same_grads(make_net(), net)


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

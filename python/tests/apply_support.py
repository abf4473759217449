"""The toy model, plans and counters that test_apply.py and
test_apply_refusals.py share: a model written here (one sacplan_torch has
never seen), float32 on the CPU."""

from __future__ import annotations

from collections import Counter
from typing import Dict, List

import torch
from torch import nn
from torch.utils.checkpoint import set_checkpoint_early_stop
from torch.utils._python_dispatch import TorchDispatchMode

import toy_transformer
from toy_transformer import Net

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

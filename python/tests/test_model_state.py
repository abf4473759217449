"""Planning leaves the model as it found it: after capture and
auto_checkpoint (a capture, a cached call whose key runs a forward, a
capture that fails midway, and two FSDP2 ranks) the parameters, buffers,
gradients, optimizer state and param_groups, and the random generators are
bitwise what they were, in the same objects (model_state.kept)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Callable, Dict

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import sacplan_torch
from sacplan_torch import SacplanError
from torchrun import torchrun


class DropBlock(nn.Module):
    """A pre-norm MLP with dropout, so that every step draws random numbers."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 2 * dim)
        self.down = nn.Linear(2 * dim, dim)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return x + self.drop(self.down(F.gelu(self.up(self.norm(x)))))


class Net(nn.Module):
    """A token embedding tied to the head (one Parameter under two names),
    a BatchNorm whose running statistics every training forward moves, and
    a buffer counting forwards."""

    def __init__(self, vocab: int = 16, dim: int = 24, blocks: int = 3):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.bn = nn.BatchNorm1d(dim)
        self.blocks = nn.ModuleList(DropBlock(dim) for _ in range(blocks))
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("forwards", torch.zeros((), dtype=torch.long))

    def forward(self, tokens):
        self.forwards += 1
        h = self.bn(self.embed(tokens).transpose(1, 2)).transpose(1, 2)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def setup():
    """The model mid-training: AdamW has stepped once (without the last
    block, which has no optimizer state yet), and a later backward left
    gradients on every block but the first. The optimizer also trains a
    loss scale outside the model."""
    torch.manual_seed(0)
    model = Net()
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 16, (4, 12), generator=g)
    targets = torch.randint(0, 16, (4, 12), generator=g)
    scale = nn.Parameter(torch.ones(()))

    def step(m):
        # A loss weight drawn from Python's and NumPy's generators, as
        # noise-level or curriculum sampling does.
        weight = 1.0 + 0.1 * random.random() + 0.1 * float(np.random.rand())
        return scale * weight * F.cross_entropy(m(tokens).flatten(0, 1), targets.flatten())

    blocks = list(model.blocks.parameters())
    rest = [p for p in model.parameters() if all(p is not q for q in blocks)] + [scale]
    optimizer = torch.optim.AdamW([{"params": blocks, "weight_decay": 0.1},
                                   {"params": rest, "weight_decay": 0.0, "lr": 3e-3}], lr=1e-3)
    step(model).backward()
    for p in model.blocks[2].parameters():
        p.grad = None
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    step(model).backward()
    for p in model.blocks[0].parameters():
        p.grad = None
    return model, step, optimizer


def everything(model: nn.Module, optimizer: torch.optim.Optimizer,
               view: Callable[[torch.Tensor], torch.Tensor] = lambda t: t) -> Dict[str, Any]:
    """What a planning call must not change: values cloned (of each tensor's
    `view`: a rank's shard of a DTensor), objects held."""
    params = dict(model.named_parameters(remove_duplicate=False))
    in_model = list(params.values())
    trained = [p for g in optimizer.param_groups for p in g["params"]]
    params.update((f"optimizer's own {i}", p) for i, p in enumerate(trained)
                  if all(p is not q for q in in_model))
    return {
        "objects": {"params": list(params.values()),
                    "buffers": list(model.buffers()),
                    "grads": [p.grad for p in params.values()],
                    "state": {id(p): (s, dict(s)) for p, s in optimizer.state.items()},
                    "groups": [g["params"] for g in optimizer.param_groups]},
        "params": {n: view(p).detach().clone() for n, p in params.items()},
        "buffers": {n: view(b).clone() for n, b in model.named_buffers()},
        "grads": {n: None if p.grad is None else view(p.grad).clone()
                  for n, p in params.items()},
        "state": {n: {k: view(v).clone() if isinstance(v, torch.Tensor) else v
                      for k, v in optimizer.state[p].items()}
                  for n, p in params.items() if p in optimizer.state},
        "groups": [{k: v for k, v in g.items() if k != "params"}
                   for g in optimizer.param_groups],
        "rng": (torch.get_rng_state(), random.getstate(), np.random.get_state()),
    }


def _same(a, b) -> bool:
    """Bitwise for tensors (dtype too), == for anything else."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and a.dtype == b.dtype and torch.equal(a, b))
    return a == b


def differences(before: Dict[str, Any], after: Dict[str, Any]) -> list:
    """Every name whose value or object changed."""
    out = []
    for what in ("params", "buffers", "grads", "state"):
        if before[what].keys() != after[what].keys():
            out.append(f"{what}: {sorted(before[what])} -> {sorted(after[what])}")
        for name in before[what].keys() & after[what].keys():
            was, now = before[what][name], after[what][name]
            if what == "state":
                if was.keys() != now.keys() or not all(_same(was[k], now[k]) for k in was):
                    out.append(f"optimizer state of {name}")
            elif not _same(was, now):
                out.append(f"{what} {name}")
    if before["groups"] != after["groups"]:
        out.append(f"param_groups: {before['groups']} -> {after['groups']}")
    torch_rng, python_rng, numpy_rng = after["rng"]
    if not torch.equal(torch_rng, before["rng"][0]):
        out.append("torch's CPU generator")
    if python_rng != before["rng"][1]:
        out.append("Python's random")
    if not all(np.array_equal(x, y) for x, y in zip(numpy_rng, before["rng"][2])):
        out.append("NumPy's generator")
    was, now = before["objects"], after["objects"]
    for what in ("params", "buffers", "grads", "groups"):
        if len(was[what]) != len(now[what]) or any(
                x is not y for x, y in zip(was[what], now[what])):
            out.append(f"{what}: other objects")
    for key, (inner, entries) in was["state"].items():
        now_inner, now_entries = now["state"].get(key, (None, {}))
        if inner is not now_inner or any(entries[k] is not now_entries.get(k)
                                         for k in entries):
            out.append("optimizer state: other objects")
    return out


def test_capture_and_auto_checkpoint_give_the_model_back(tmp_path):
    model, step, optimizer = setup()
    before = everything(model, optimizer)
    sacplan_torch.capture(model, step, blocks="blocks", optimizer=optimizer, repeats=1)
    assert differences(before, everything(model, optimizer)) == []

    result = sacplan_torch.auto_checkpoint(model, step, "1GB", blocks="blocks",
                                           optimizer=optimizer, cache_dir=tmp_path,
                                           warmup=0, repeats=1)
    assert result.captured
    assert differences(before, everything(model, optimizer)) == []

    # From the cache: no capture, only the key's forward without grad,
    # which moves the BatchNorm's statistics and draws dropout's numbers.
    result.remove()
    cached = sacplan_torch.auto_checkpoint(model, step, "1GB", blocks="blocks",
                                           optimizer=optimizer, cache_dir=tmp_path)
    assert not cached.captured
    assert differences(before, everything(model, optimizer)) == []


def _fails_on_fifth_call(step, how: str):
    calls = []

    def failing(m):
        calls.append(m)
        if len(calls) < 5:
            return step(m)
        if how == "loss without grad":
            # A step that evaluates under no_grad by mistake: capture's own
            # check refuses the loss.
            with torch.no_grad():
                return step(m)
        raise RuntimeError("the data loader ran out")

    return failing, calls


@pytest.mark.parametrize("how", ["loss without grad", "error in the step"])
def test_a_capture_that_fails_midway_gives_the_model_back(how):
    model, step, optimizer = setup()
    before = everything(model, optimizer)
    failing, calls = _fails_on_fifth_call(step, how)
    expected = SacplanError if how == "loss without grad" else RuntimeError
    with pytest.raises(expected):
        sacplan_torch.capture(model, failing, blocks="blocks", optimizer=optimizer, repeats=1)
    assert len(calls) == 5  # four steps trained before it failed
    assert differences(before, everything(model, optimizer)) == []


def test_fsdp2_ranks_get_their_shards_back(tmp_path, free_port):
    """model_state_worker.py: auto_checkpoint on two gloo ranks, each block
    and the root under fully_shard; each rank compares its shards."""
    torchrun(Path(__file__).with_name("model_state_worker.py"), 2, [tmp_path], free_port,
             timeout_s=300)
    for rank in range(2):
        report = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert report["sharded"] == report["params"] > 0
        assert report["differences"] == [], rank

"""The examples' own blocks in fp32: under every applied plan, the loss and
every parameter gradient equal plain autograd's within 1e-5."""

from __future__ import annotations

import pytest
import torch

import sacplan_torch
from sacplan_cli import plan
from test_prediction import EXAMPLE_NAMES, EXAMPLES

PLANS = ("none", "full", "attn_only", "torchtitan", "optimal")


def loss_and_grads(setup):
    loss = setup.step(setup.model)
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in setup.model.named_parameters()
                           if p.grad is not None}


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_plans_change_memory_not_gradients(example, tmp_path):
    def fresh():
        return sacplan_torch.load_setup(f"{EXAMPLES / example}.py:setup", size="small",
                                        dtype=torch.float32)

    captured = fresh()
    profile = str(tmp_path / "profile.json")
    sacplan_torch.capture(captured.model, captured.step, blocks=captured.blocks,
                          name=captured.name, path=profile, warmup=0, repeats=1)
    reference_loss, reference = loss_and_grads(fresh())
    full_peak = plan(profile, str(tmp_path / "full.json"), preset="full")["predicted"]["peak_bytes"]
    none_peak = plan(profile, str(tmp_path / "none.json"), preset="none")["predicted"]["peak_bytes"]
    recomputed = 0
    for name in PLANS:
        if name == "optimal":
            document = plan(profile, str(tmp_path / "optimal.json"),
                            budget=(full_peak + none_peak) // 2)
        else:
            document = plan(profile, str(tmp_path / f"{name}.json"), preset=name)
        recomputed += sum(len(block["recompute"]) for block in document["blocks"])
        run = fresh()
        sacplan_torch.apply_plan(run.model, document, blocks=run.blocks, model_name=run.name)
        loss, grads = loss_and_grads(run)
        torch.testing.assert_close(loss, reference_loss, rtol=1e-5, atol=0)
        assert grads.keys() == reference.keys()
        for key, grad in grads.items():
            torch.testing.assert_close(grad, reference[key], rtol=1e-5,
                                       atol=1e-5 * reference[key].abs().max().item(),
                                       msg=lambda m: f"{name}: {key}: {m}")
    assert recomputed > 0, "no plan recomputed anything: the test would prove nothing"

"""apply_plan under FSDP2 (fully_shard) on two CPU ranks (gloo, torchrun).

fsdp_worker.py runs every case of fsdp_worker.CASES in one torchrun launch
(two ranks, each with its own half of a global batch) and writes the losses,
full gradients, final parameters and op counts; here they are compared with
one process training the same model on the whole batch without FSDP and
without a plan. See fsdp_worker.py for the math and the two orders
(apply_plan before fully_shard, as TorchTitan does, and after).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import fsdp_worker as worker
from torchrun import assert_close, assert_same_steps, torchrun

WORKER = Path(__file__).with_name("fsdp_worker.py")
TIMEOUT_S = 240
RTOL = 1e-5  # against one process


@pytest.fixture(scope="module")
def results(tmp_path_factory, free_port):
    out = tmp_path_factory.mktemp("fsdp") / "results.pt"
    torchrun(WORKER, 2, [out], free_port, TIMEOUT_S)
    return torch.load(out, weights_only=True)


@pytest.fixture(scope="module")
def reference():
    return worker.reference()


@pytest.mark.parametrize("case", list(worker.CASES))
def test_fsdp_training_equals_one_process(case, results, reference):
    got = results[case]
    assert len(got["losses"]) == worker.STEPS
    assert_same_steps(got, reference, worker.STEPS, RTOL)
    for name, param in reference["params"].items():
        assert_close(got["params"][name], param, f"parameter {name} after {worker.STEPS} steps",
                     RTOL)


@pytest.mark.parametrize("case", [c for c in worker.CASES if c != "no_plan"])
def test_plan_changes_nothing_but_the_recompute(case, results):
    """Checkpointing recomputes the same fp32 ops on the same shards: the
    gradients under a plan equal FSDP2's without one."""
    for step in range(worker.STEPS):
        for name, grad in results["no_plan"]["grads"][step].items():
            torch.testing.assert_close(results[case]["grads"][step][name], grad,
                                       rtol=1e-5, atol=0)


# Matmuls (aten.addmm) and attentions that ran in the backward of each step
# (the forward is the same for every case: 4 matmuls and one attention per
# block plus embed and head). The backward of a Linear runs aten.mm, so every
# addmm there is a recompute. PyTorch stops a recompute once the last tensor
# backward needs is back, so mlp.fc2 (whose output only the residual add
# reads) is not re-run even when unsaved: 3 matmuls per fully
# checkpointed block.
EXPECTED_BACKWARD = {
    "no_plan": {"addmm": 0, worker.ATTENTION_OP: 0},
    "full/apply_then_shard": {"addmm": 3 * worker.NBLOCKS, worker.ATTENTION_OP: worker.NBLOCKS},
    "full/shard_then_apply": {"addmm": 3 * worker.NBLOCKS, worker.ATTENTION_OP: worker.NBLOCKS},
    "attention/apply_then_shard": {"addmm": 3 * worker.NBLOCKS, worker.ATTENTION_OP: 0},
    # block 0 saves every matmul and the attention, block 1 is not
    # checkpointed, block 2 saves mlp.fc1 and re-runs qkv, out, attention.
    "mixed/shard_then_apply": {"addmm": 2, worker.ATTENTION_OP: 1},
}


@pytest.mark.parametrize("case", list(worker.CASES))
def test_plan_recomputes_what_it_says_under_fsdp(case, results):
    assert set(EXPECTED_BACKWARD) == set(worker.CASES)
    for step in range(worker.STEPS):
        assert results[case]["forward"][step] == {
            "addmm": 4 * worker.NBLOCKS + 2, worker.ATTENTION_OP: worker.NBLOCKS}
        assert results[case]["backward"][step] == EXPECTED_BACKWARD[case], step

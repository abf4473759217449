"""Predicted peak (sacplan simulate, torch-sac, on a captured profile) against
the measured peak of real PyTorch training steps under the applied plan.

Five example models (python/examples) at two sizes each, bf16 autocast with
fp32 master weights and AdamW, whole steps: none, full, attn_only,
torchtitan and the optimal plan at two budgets. Each prediction within the
README's stated error plus one margin (TOLERANCE), and the plans rank the
same by measured and by predicted peak.
"""

from __future__ import annotations

import pathlib

import pytest
import torch

import sacplan_torch
from sacplan_cli import check_predictions, plan_path, plans_for, simulate

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
EXAMPLE_NAMES = ("wan_block", "single_stream", "llama_block", "flux_double_stream", "moe_block")
CASES = [(example, size) for example in EXAMPLE_NAMES for size in ("small", "large")]
# The README's claim (Accuracy, the bridge row): predicted minus
# measured peak within 1.9% on every example (LLaMA's full and attn_only
# plans are the furthest; the others within 0.9%).
STATED_ERROR = 0.019
# The one margin, a fifth of a point. Run to run the peaks here are
# byte-exact (the allocator's record); what may move them is another CPU or
# PyTorch build sizing differently the few bytes capture does not see.
MARGIN = 0.002
TOLERANCE = STATED_ERROR + MARGIN


def make_setup(example: str, size: str, dtype=torch.bfloat16):
    return sacplan_torch.load_setup(f"{EXAMPLES / example}.py:setup", size=size, dtype=dtype)


@pytest.mark.parametrize("example,size", CASES)
def test_measured_peak_matches_prediction(example, size, tmp_path):
    setup = make_setup(example, size)
    profile_path = str(tmp_path / "profile.json")
    sacplan_torch.capture(setup.model, setup.step, blocks=setup.blocks,
                          optimizer=setup.make_optimizer(setup.model), name=setup.name,
                          path=profile_path, warmup=1, repeats=1)
    plans = plans_for(profile_path, tmp_path)
    rows = {}
    for label, document in plans.items():
        predicted = simulate(profile_path, plan_path(tmp_path, label))
        fresh = make_setup(example, size)
        sacplan_torch.apply_plan(fresh.model, document, blocks=fresh.blocks,
                                 model_name=fresh.name)
        measured = sacplan_torch.measure_peak(
            fresh.model, fresh.step, optimizer=fresh.make_optimizer(fresh.model), steps=1,
            timed=False)
        rows[label] = (predicted["peak_bytes"], measured.peak_bytes)
    check_predictions(f"{example} {size}", rows, TOLERANCE)
    # The plans must span a real range, or ranking them proves nothing.
    assert rows["none"][1] > 1.3 * rows["full"][1], rows

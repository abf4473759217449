"""The plan contract's conformance cases (tests/conformance/cases): apply_plan,
given the profile, accepts or refuses each plan as `sacplan simulate` does,
with the same message (tests/cli/conformance_test.cc holds the command to
expect.json). The models are those the profiles were captured from: the
examples for bench/data's, unseen_blocks.py's dropout model (random ops, a
host link) for tests/conformance/profiles'.

Cases marked `step` are what a plan says of itself or what a block finds
out as its forward runs (the checkpoint flag against the recompute list,
copy triggers, random replay): apply_plan without the profile, through one
training step, must judge them alike too."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

import sacplan_torch
import unseen_blocks

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "conformance" / "cases"
EXAMPLES = ROOT / "python" / "examples"
# Which example's small size each bench/data profile was captured from, and
# under which autocast dtype (its blocks' streams are in it).
EXAMPLE_OF = {
    "bench/data/wan_block_small.captured.json": ("wan_block", torch.bfloat16),
    "bench/data/flux_double_stream_small.captured.json": ("flux_double_stream", torch.bfloat16),
}
DROPOUT_PROFILE = "tests/conformance/profiles/dropout_small.captured.json"


def _cases():
    return sorted(p.name for p in CASES.iterdir() if p.is_dir())


def _setup(profile: str):
    if profile == DROPOUT_PROFILE:
        return unseen_blocks.setup("dropout", "small")
    example, dtype = EXAMPLE_OF[profile]
    return sacplan_torch.load_setup(f"{EXAMPLES / example}.py:setup", size="small",
                                    dtype=dtype)


def test_at_least_forty_cases_with_both_outcomes():
    expects = [json.loads((CASES / name / "expect.json").read_text()) for name in _cases()]
    assert len(expects) >= 40
    assert sum(e["accept"] for e in expects) >= 10
    assert sum(not e["accept"] for e in expects) >= 30


def test_the_rules_the_bridge_acts_on_have_cases_both_ways():
    """The checkpoint flag, copy triggers and random replay: each accepted
    and refused, and judged through a step without the profile too."""
    expects = {name: json.loads((CASES / name / "expect.json").read_text())
               for name in _cases()}
    for topic in ("checkpoint", "trigger", "random"):
        cases = [e for name, e in expects.items() if topic in name]
        assert {e["accept"] for e in cases} == {True, False}, topic
        assert any(e["step"] for e in cases), topic


def _apply(setup, plan: Path, profile):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # plans in sacplan semantics warn
        return sacplan_torch.apply_plan(setup.model, str(plan), blocks=setup.blocks,
                                        model_name=setup.name, profile=profile)


def _refusal(exc: sacplan_torch.SacplanError, plan: Path) -> str:
    return str(exc).replace(str(plan), "<plan>")


@pytest.mark.parametrize("case", _cases())
def test_apply_plan_agrees_with_simulate(case):
    folder = CASES / case
    expect = json.loads((folder / "expect.json").read_text())
    plan = folder / "plan.json" if (folder / "plan.json").exists() else folder / "plan.txt"
    profile = str(ROOT / expect["profile"])
    setup = _setup(expect["profile"])
    if expect["accept"]:
        _apply(setup, plan, profile).remove()
    else:
        with pytest.raises(sacplan_torch.SacplanError) as refused:
            _apply(setup, plan, profile)
        assert _refusal(refused.value, plan) == expect["message"]
    if not expect["step"]:
        return
    # Without the profile: refused as the plan is read, or in the step by a
    # block's forward (a message naming no file: simulate's after "<plan>: ").
    try:
        applied = _apply(setup, plan, None)
        setup.step(setup.model).backward()
        applied.remove()
    except sacplan_torch.SacplanError as exc:
        message = _refusal(exc, plan)
        assert not expect["accept"], message
        assert message in (expect["message"], expect["message"].removeprefix("<plan>: "))
    else:
        assert expect["accept"], "refused with the profile, accepted through a step without"

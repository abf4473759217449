"""The plan contract's conformance cases (tests/conformance/cases): apply_plan,
given the profile, accepts or refuses each plan as `sacplan simulate` does,
with the same message (tests/cli/conformance_test.cc holds the command to
expect.json). The models are the examples the bench/data profiles were
captured from."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

import sacplan_torch

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "conformance" / "cases"
EXAMPLES = ROOT / "python" / "examples"
# Which example's small size each profile was captured from.
EXAMPLE_OF = {
    "bench/data/wan_block_small.captured.json": "wan_block",
    "bench/data/flux_double_stream_small.captured.json": "flux_double_stream",
}


def _cases():
    return sorted(p.name for p in CASES.iterdir() if p.is_dir())


def _setup(profile: str):
    return sacplan_torch.load_setup(f"{EXAMPLES / EXAMPLE_OF[profile]}.py:setup",
                                    size="small", dtype=torch.float32)


def test_at_least_forty_cases_with_both_outcomes():
    expects = [json.loads((CASES / name / "expect.json").read_text()) for name in _cases()]
    assert len(expects) >= 40
    assert sum(e["accept"] for e in expects) >= 10
    assert sum(not e["accept"] for e in expects) >= 30


@pytest.mark.parametrize("case", _cases())
def test_apply_plan_agrees_with_simulate(case):
    folder = CASES / case
    expect = json.loads((folder / "expect.json").read_text())
    plan = folder / "plan.json" if (folder / "plan.json").exists() else folder / "plan.txt"
    profile = str(ROOT / expect["profile"])
    setup = _setup(expect["profile"])

    def apply():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # plans in sacplan semantics warn
            return sacplan_torch.apply_plan(setup.model, str(plan), blocks=setup.blocks,
                                            model_name=setup.name, profile=profile)

    if expect["accept"]:
        apply().remove()
        return
    with pytest.raises(sacplan_torch.SacplanError) as refused:
        apply()
    assert str(refused.value).replace(str(plan), "<plan>") == expect["message"]

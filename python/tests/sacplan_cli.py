"""Runs the sacplan command line (the C++ planner) from the Python tests."""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]
PRESETS = ("none", "full", "attn_only", "torchtitan")


def sacplan_binary() -> str:
    """SACPLAN_BIN, else the Release build's binary. The README's test
    command builds it before pytest runs; a missing binary is a failure,
    not a skip."""
    path = os.environ.get("SACPLAN_BIN", str(REPO / "build" / "cli" / "sacplan"))
    if not os.access(path, os.X_OK):
        raise AssertionError(f"sacplan binary not found at {path}: build it first "
                             "(cmake --build --preset default) or set SACPLAN_BIN")
    return path


def run(*args: str) -> str:
    done = subprocess.run([sacplan_binary(), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"sacplan {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def plan(profile: str, out: str, *, preset: str | None = None,
         budget: int | None = None) -> dict:
    """`sacplan plan` in torch-sac semantics; returns the plan document."""
    args = ["plan", "--profile", profile, "--semantics", "torch-sac", "-o", out]
    if preset is not None:
        args += ["--preset", preset]
    if budget is not None:
        args += ["--budget", str(budget)]
    run(*args)
    with open(out, encoding="utf-8") as f:
        return json.load(f)


def simulate(profile: str, plan_path: str) -> dict:
    return json.loads(run("simulate", "--profile", profile, "--plan", plan_path, "--json"))


def plans_for(profile_path: str, tmp: pathlib.Path) -> dict:
    """Every preset's plan, then optimal plans at budgets a third and two
    thirds of the way from full checkpointing's peak to no checkpointing's;
    label -> plan document, written to tmp as `plan_path(tmp, label)`."""
    plans = {name: plan(profile_path, plan_path(tmp, name), preset=name) for name in PRESETS}
    low = plans["full"]["predicted"]["peak_bytes"]
    high = plans["none"]["predicted"]["peak_bytes"]
    for label, fraction in (("optimal@1/3", 1 / 3), ("optimal@2/3", 2 / 3)):
        budget = int(low + fraction * (high - low))
        plans[label] = plan(profile_path, plan_path(tmp, label), budget=budget)
        assert plans[label]["predicted"]["peak_bytes"] <= budget
    return plans


def plan_path(tmp: pathlib.Path, label: str) -> str:
    return str(tmp / f"{label.replace('/', '_')}.json")


def table_of(rows: dict) -> str:
    """rows: label -> (predicted, measured); one line per label with the
    error."""
    return "\n".join(f"  {label:12s} predicted {p:>11,.0f}  measured {m:>11,.0f}  "
                     f"{100 * (p - m) / m:+.2f}%" for label, (p, m) in rows.items())


def check_predictions(title: str, rows: dict, tolerance: float) -> None:
    """rows: label -> (predicted, measured). Each prediction within
    `tolerance` of its measurement, and any two plans whose predictions
    differ by more than the tolerance are measured in the same order."""
    table = table_of(rows)
    print(f"\n{title}:\n{table}")
    for label, (predicted, measured) in rows.items():
        assert abs(predicted - measured) <= tolerance * measured, f"{label}\n{table}"
    for (a, (pa, ma)), (b, (pb, mb)) in itertools.combinations(rows.items(), 2):
        if abs(pa - pb) > tolerance * max(pa, pb):
            assert (pa < pb) == (ma < mb), f"{a} vs {b}\n{table}"

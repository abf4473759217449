"""Runs the sacplan command line (the C++ planner) from the Python tests."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]


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

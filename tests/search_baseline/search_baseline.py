"""Holds the solver to the plans it made when this baseline was recorded.

For each profile in tests/data/search_baseline (PROFILES), both semantics,
with offload (--host-budget auto) and without (--host-budget 0), 8 budgets
evenly spaced from full checkpointing's simulated peak to no
checkpointing's (each semantics' own presets): `sacplan plan` at each, and
its predicted step time and peak, or the error that said it was infeasible.

  record: writes those figures to baseline.json, with each profile's
    planning wall time (the median of --repeats runs of all its plans;
    informational, never asserted).
  check: plans every case again and fails unless each plan is feasible
    where the recorded one was, fits its budget, and steps no more than
    STEP_TOLERANCE slower than the recorded plan (faster is fine).
    --keep-plans DIR also writes each plan.json there, to compare a
    refactoring's plans byte for byte.

The binary is SACPLAN_BIN (the `sacplan` command line).
  SACPLAN_BIN=build/cli/sacplan python3 tests/search_baseline/search_baseline.py check
(ctest runs one check per profile: planner_search_baseline_*.)
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "search_baseline"
BASELINE = DATA / "baseline.json"
# name -> (profile file, how it was made).
PROFILES = {
    "wan2.1-1.3b": ("wan2.1-1.3b_72k_h100.profile.json",
                    "sacplan profile --model wan2.1-1.3b --tokens 72000 --device h100"),
    "wan2.1-14b-fsdp8-sp8": ("wan2.1-14b_fsdp8_sp8_h100.profile.json",
                             "sacplan profile --model wan2.1-14b --device h100 --world-size 8 "
                             "--fsdp --sp 8 (its default 75,600 tokens)"),
    "diffusers-wan-captured": ("diffusers_wan_5blocks.captured.json",
                               "tests/search_baseline/capture_held_out.py"),
}
SEMANTICS = ("sacplan", "torch-sac")
HOST_BUDGETS = ("auto", "0")
BUDGETS = 8
# The bar: a plan may be at most 0.1% slower than today's solver's.
STEP_TOLERANCE = 0.001


def binary() -> str:
    path = os.environ.get("SACPLAN_BIN", "")
    if not path or not os.access(path, os.X_OK):
        sys.exit(f"search_baseline: SACPLAN_BIN must name the sacplan binary (got '{path}')")
    return path


def run_plan(profile: pathlib.Path, out: pathlib.Path, *args: str) -> Optional[str]:
    """`sacplan plan`; None on success, else its error (first line of stderr)."""
    done = subprocess.run([binary(), "plan", "--profile", str(profile), "-o", str(out), *args],
                          capture_output=True, text=True)
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[0] if lines else f"exit status {done.returncode}"


def predicted(path: pathlib.Path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)["predicted"]


def budgets_of(profile: pathlib.Path, semantics: str, tmp: pathlib.Path) -> List[int]:
    peaks = {}
    for preset in ("full", "none"):
        out = tmp / f"{preset}.json"
        error = run_plan(profile, out, "--preset", preset, "--semantics", semantics,
                         "--host-budget", "0")
        if error:
            sys.exit(f"search_baseline: preset {preset} of {profile.name}: {error}")
        peaks[preset] = predicted(out)["peak_bytes"]
    low, high = peaks["full"], peaks["none"]
    return [low + (high - low) * i // (BUDGETS - 1) for i in range(BUDGETS)]


def cases_of(name: str, tmp: pathlib.Path) -> List[dict]:
    profile = DATA / PROFILES[name][0]
    cases = []
    for semantics in SEMANTICS:
        for budget in budgets_of(profile, semantics, tmp):
            for host_budget in HOST_BUDGETS:
                cases.append({"profile": name, "semantics": semantics,
                              "host_budget": host_budget, "budget_bytes": budget})
    return cases


def plan_case(case: dict, out: pathlib.Path) -> dict:
    """The case's plan: {"step_ms", "peak_bytes"} or {"infeasible": error}."""
    profile = DATA / PROFILES[case["profile"]][0]
    error = run_plan(profile, out, "--budget", str(case["budget_bytes"]),
                     "--semantics", case["semantics"], "--host-budget", case["host_budget"])
    if error:
        return {"infeasible": error}
    figures = predicted(out)
    return {"step_ms": figures["step_ms"], "peak_bytes": figures["peak_bytes"]}


def label(case: dict) -> str:
    return (f"{case['profile']} {case['semantics']} host {case['host_budget']} "
            f"budget {case['budget_bytes']}")


def record(repeats: int) -> None:
    document: Dict[str, object] = {
        "about": "tests/search_baseline/search_baseline.py record; each case's plan from "
                 "the solver of its time (sacplan plan's predicted step_ms and peak_bytes)",
        "binary": binary(),
        "profiles": {name: {"file": file, "made_by": made_by}
                     for name, (file, made_by) in PROFILES.items()},
        "cases": [],
    }
    with tempfile.TemporaryDirectory() as folder:
        tmp = pathlib.Path(folder)
        for name in PROFILES:
            cases = cases_of(name, tmp)
            walls = []
            for _ in range(repeats):
                start = time.perf_counter()
                results = [plan_case(case, tmp / "plan.json") for case in cases]
                walls.append(time.perf_counter() - start)
            for case, result in zip(cases, results):
                document["cases"].append({**case, **result})
            document["profiles"][name]["plan_wall_s"] = {
                "plans": len(cases), "median_of": repeats,
                "all_plans": round(statistics.median(walls), 3),
                "per_plan": round(statistics.median(walls) / len(cases), 4)}
            print(f"{name}: {len(cases)} plans in {statistics.median(walls):.2f} s (median)")
    with open(BASELINE, "w", encoding="utf-8") as f:
        json.dump(document, f, indent=1)
        f.write("\n")
    print(f"wrote {BASELINE}")


def check(profile: Optional[str], keep_plans: Optional[pathlib.Path]) -> int:
    with open(BASELINE, encoding="utf-8") as f:
        baseline = json.load(f)
    cases = [(i, case) for i, case in enumerate(baseline["cases"])
             if profile is None or case["profile"] == profile]
    if not cases:
        sys.exit(f"search_baseline: no cases for profile '{profile}'")
    failures = []
    slowest = 0.0
    if keep_plans:
        keep_plans.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        for i, recorded in cases:
            out = (keep_plans or pathlib.Path(folder)) / f"case{i:03d}.json"
            now = plan_case(recorded, out)
            if "infeasible" in now:
                if "infeasible" not in recorded:
                    failures.append(f"{label(recorded)}: infeasible now ({now['infeasible']}), "
                                    f"was {recorded['step_ms']:.6f} ms")
                continue
            if now["peak_bytes"] > recorded["budget_bytes"]:
                failures.append(f"{label(recorded)}: peak {now['peak_bytes']} over the budget")
            if "infeasible" in recorded:
                continue  # Any plan that fits beats none.
            slower = now["step_ms"] / recorded["step_ms"] - 1
            slowest = max(slowest, slower)
            if slower > STEP_TOLERANCE:
                failures.append(f"{label(recorded)}: step {now['step_ms']:.6f} ms, "
                                f"{100 * slower:+.4f}% against {recorded['step_ms']:.6f} ms")
    print(f"{len(cases)} cases; slowest against the baseline "
          f"{100 * slowest:+.4f}% (bar {100 * STEP_TOLERANCE:.1f}%)")
    for failure in failures:
        print(f"FAIL {failure}")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    recorder = commands.add_parser("record", help="write baseline.json with SACPLAN_BIN")
    recorder.add_argument("--repeats", type=int, default=3,
                          help="runs of each profile's plans for the wall time's median")
    checker = commands.add_parser("check", help="hold SACPLAN_BIN to baseline.json")
    checker.add_argument("--profile", choices=sorted(PROFILES),
                         help="only this profile's cases (default: all)")
    checker.add_argument("--keep-plans", type=pathlib.Path,
                         help="folder to write each case's plan.json to")
    args = parser.parse_args()
    if args.command == "record":
        record(args.repeats)
        return 0
    return check(args.profile, args.keep_plans)


if __name__ == "__main__":
    sys.exit(main())

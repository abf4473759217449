"""The user flow the examples walk through: capture -> plan -> apply -> measure.

Each example's main() calls walk(setup). Steps:

1. sacplan_torch.capture(): one real training step of the model -> profile.json
2. the sacplan CLI: `plan --preset full` and `--preset none` give the peaks of
   checkpointing every block and of none; unless --budget is given, the
   budget is halfway between them. `plan --budget B --semantics torch-sac`
   then solves for the fastest plan under it.
3. sacplan_torch.apply_plan() on a fresh model (same seed), a few training
   steps with the optimizer.
4. sacplan_torch.measure_peak(): the measured peak and step time beside the
   plan's prediction, for the plan and for the two presets.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from typing import Callable, List, Optional

import torch

import sacplan_torch

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def _sacplan_binary() -> Optional[str]:
    binary = os.environ.get("SACPLAN", "build/cli/sacplan")
    if os.path.sep in binary:
        return binary if os.path.isfile(binary) and os.access(binary, os.X_OK) else None
    return shutil.which(binary)


def _run(cmd: List[str]) -> str:
    print("  $ " + " ".join(cmd))
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"{os.path.basename(cmd[0])} {cmd[1]} failed (exit {result.returncode})")
    return result.stdout


def _predicted(plan_path: str) -> dict:
    with open(plan_path) as f:
        return json.load(f)["predicted"]


def _mb(n: float) -> str:
    return f"{n / 1e6:9.2f}"


def walk(setup_fn: Callable[..., sacplan_torch.Setup], title: str,
         argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=f"{title}: capture, plan, apply, measure")
    parser.add_argument("--size", choices=["small", "large"], default="small")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16",
                        help="autocast dtype of the step (fp32: no autocast)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", help="peak budget for the plan (e.g. 40MiB); "
                                         "default: halfway between --preset full and none")
    parser.add_argument("--steps", type=int, default=3, help="training steps to train and measure")
    parser.add_argument("--out", default="out", help="folder for profile and plans")
    args = parser.parse_args(argv)

    binary = _sacplan_binary()
    if binary is None:
        print(f"sacplan CLI not found at {os.environ.get('SACPLAN', 'build/cli/sacplan')}: "
              "build it (see README.md) or set SACPLAN=/path/to/sacplan", file=sys.stderr)
        return 2

    dtype = DTYPES[args.dtype]
    make = lambda: setup_fn(args.size, seed=args.seed, dtype=dtype)  # noqa: E731
    os.makedirs(args.out, exist_ok=True)

    setup = make()
    name = setup.name
    params = sum(p.numel() for p in setup.model.parameters())
    print(f"{title} '{name}': {params / 1e6:.2f}M parameters, {args.dtype} activations")

    profile = os.path.join(args.out, f"{name}.profile.json")
    print(f"[1/4] capture -> {profile}")
    sacplan_torch.capture(setup.model, setup.step, blocks=setup.blocks,
                          optimizer=setup.make_optimizer(setup.model), name=name, path=profile)
    del setup

    print("[2/4] plan")
    plans = {}
    for preset in ("none", "full"):
        path = os.path.join(args.out, f"{name}.{preset}.json")
        _run([binary, "plan", "--profile", profile, "--preset", preset,
              "--semantics", "torch-sac", "-o", path])
        plans[preset] = path
    if args.budget:
        budget = args.budget
    else:
        none_peak = _predicted(plans["none"])["peak_bytes"]
        full_peak = _predicted(plans["full"])["peak_bytes"]
        budget = str(int((none_peak + full_peak) // 2))
    path = os.path.join(args.out, f"{name}.plan.json")
    print(_run([binary, "plan", "--profile", profile, "--budget", budget,
                "--semantics", "torch-sac", "-o", path]).rstrip())
    plans["plan"] = path

    print(f"[3/4] apply {path} to a fresh model and train {args.steps} steps")
    setup = make()
    sacplan_torch.apply_plan(setup.model, path, blocks=setup.blocks, model_name=name)
    optimizer = setup.make_optimizer(setup.model)
    for i in range(args.steps):
        loss = setup.step(setup.model)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"  step {i + 1}: loss {loss.item():.5f}")
    del loss

    print("[4/4] measure (peak in MB = 1e6 bytes, as the CLI prints; step in ms)")
    print(f"  {'plan':<6} {'predicted':>9} {'measured':>9} {'error':>7}   {'predicted':>9} {'measured':>9}")
    for label in ("none", "plan", "full"):
        if label == "plan":
            measured_setup, opt = setup, optimizer        # the model trained above
        else:
            measured_setup = make()
            sacplan_torch.apply_plan(measured_setup.model, plans[label],
                                     blocks=measured_setup.blocks, model_name=name)
            opt = measured_setup.make_optimizer(measured_setup.model)
        predicted = _predicted(plans[label])
        measured = sacplan_torch.measure_peak(measured_setup.model, measured_setup.step,
                                              optimizer=opt, steps=args.steps)
        error = (measured.peak_bytes - predicted["peak_bytes"]) / predicted["peak_bytes"]
        print(f"  {label:<6} {_mb(predicted['peak_bytes'])} {_mb(measured.peak_bytes)} "
              f"{error:+7.1%}   {predicted['step_ms']:9.1f} {measured.step_ms:9.1f}")
    return 0

"""The PyTorch bridge on a GPU, for scripts/gpu-check.sh (docs/gpu.md).

Captures an example model with sacplan_torch (op times from CUDA events),
plans none, full and attn_only with `sacplan plan --semantics torch-sac`,
then the optimal plan at the budget halfway between none's and full's
predicted peaks and, when the profile has a host link (capture measures
it on a GPU), the optimal plan with offload (`--host-budget auto`) at
full's predicted peak, and applies each plan to a fresh model in a fresh process
(the caching allocator's reserved bytes depend on what the process did
before) and trains a few steps under it. Writes OUT/bridge.json: per plan, the predicted
allocated peak, reserved peak and step time beside the measured
max_memory_allocated, max_memory_reserved and CUDA step time, and for the
offload plan the host bytes it held against the predicted host peak.
Last, in a fresh process, `auto_checkpoint` at the optimal plan's budget
with its measured check on: under "auto", which plan it kept, what it
measured for each plan it tried, and the kept plan trained like the others
(the kept plan must not be measurably slower than the fastest preset that
fits).

    python3 scripts/gpu_bridge_check.py --sacplan build/cli/sacplan \
        --out out/gpu-check [--setup FILE.py:FUNCTION] [--arg KEY=VALUE ...]

--device cpu runs the same on the CPU (no reserved peak there), which is
how the script is tested without a GPU; --cpu-host-link GBPS gives the CPU
run a host link to plan offload over.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))

import sacplan_torch  # noqa: E402
from sacplan_torch.__main__ import _parse_args  # noqa: E402
from sacplan_torch.setup_spec import load_setup  # noqa: E402

PRESETS = ("none", "full", "attn_only")


def plan(sacplan: str, profile: str, out: str, *extra: str) -> dict:
    subprocess.run([sacplan, "plan", "--profile", profile, "--semantics", "torch-sac",
                    "-o", out, *extra], check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def measure(ns, plan_path: str) -> dict:
    """Trains ns.steps steps of a fresh model under the plan, in this process."""
    setup = load_setup(ns.setup, **ns.kwargs)
    applied = sacplan_torch.apply_plan(setup.model, plan_path, blocks=setup.blocks,
                                       model_name=setup.name)
    optimizer = setup.make_optimizer(setup.model) if setup.make_optimizer else None
    cuda = ns.device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    result = sacplan_torch.measure_peak(setup.model, setup.step, optimizer=optimizer,
                                        steps=ns.steps)
    measured = {"peak_bytes": result.peak_bytes,
                "reserved_peak_bytes": torch.cuda.max_memory_reserved() if cuda else None,
                "step_ms": result.step_ms,
                "host_peak_bytes": applied.host.peak_bytes}
    return {"measured": measured, "first_loss": result.losses[0]}


def measure_auto(ns, budget: int) -> dict:
    """auto_checkpoint on a fresh model at `budget`, its measured check on,
    then its kept plan trained as measure() trains the others."""
    setup = load_setup(ns.setup, **ns.kwargs)
    optimizer = setup.make_optimizer(setup.model) if setup.make_optimizer else None
    start = time.perf_counter()
    result = sacplan_torch.auto_checkpoint(setup.model, setup.step, budget, blocks=setup.blocks,
                                           optimizer=optimizer, name=setup.name)
    auto_s = time.perf_counter() - start
    if ns.device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    run = sacplan_torch.measure_peak(setup.model, setup.step, optimizer=optimizer,
                                     steps=ns.steps)
    return {"chosen": result.chosen, "notes": result.notes, "auto_s": auto_s,
            "checked": {name: vars(m) for name, m in (result.measured or {}).items()},
            "predicted": {"peak_bytes": result.predicted_peak_bytes,
                          "step_ms": result.predicted_step_ms},
            "measured": {"peak_bytes": run.peak_bytes, "step_ms": run.step_ms}}


def measure_in_child(argv, plan_path: str) -> dict:
    """measure() in a fresh python3 process; its result comes back as JSON."""
    result_path = plan_path + ".measured.json"
    subprocess.run([sys.executable, os.path.abspath(__file__), *argv, "--measure", plan_path,
                    "--result", result_path], check=True)
    with open(result_path) as f:
        return json.load(f)


def ratio(measured, predicted):
    if measured is None or not predicted:
        return None
    return measured / predicted - 1.0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sacplan", required=True, help="the sacplan binary")
    parser.add_argument("--out", required=True, help="folder for bridge.json and its files")
    parser.add_argument("--setup", default=os.path.join(REPO, "python/examples/wan_block.py")
                        + ":setup")
    parser.add_argument("--arg", action="append", default=None, metavar="KEY=VALUE",
                        help="setup argument (default: size=gpu)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--cpu-host-link", type=float, metavar="GBPS",
                        help="on CPU, the host link (GB/s each way) to plan offload over")
    parser.add_argument("--auto-budget", type=int, help=argparse.SUPPRESS)  # the auto child
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # the child's plan.json
    parser.add_argument("--result", help=argparse.SUPPRESS)   # where the child writes
    ns = parser.parse_args(argv)
    ns.kwargs = _parse_args(ns.arg or ["size=gpu"])
    ns.kwargs["device"] = ns.device
    if ns.measure:
        with open(ns.result, "w") as f:
            json.dump(measure(ns, ns.measure), f)
        return 0
    if ns.auto_budget:
        with open(ns.result, "w") as f:
            json.dump(measure_auto(ns, ns.auto_budget), f)
        return 0
    os.makedirs(ns.out, exist_ok=True)
    profile = os.path.join(ns.out, "bridge_profile.json")

    setup = load_setup(ns.setup, **ns.kwargs)
    optimizer = setup.make_optimizer(setup.model) if setup.make_optimizer else None
    start = time.perf_counter()
    host_link = None
    if ns.cpu_host_link and not ns.device.startswith("cuda"):
        # No per-tensor host cost: over a fast made-up link, the hooks'
        # measured cost would outweigh every tensor's bytes.
        host_link = {"d2h_gbps": ns.cpu_host_link, "h2d_gbps": ns.cpu_host_link,
                     "host_memory_bytes": 1 << 30, "offload_host_us": 0, "fetch_host_us": 0}
    captured = sacplan_torch.capture(setup.model, setup.step, blocks=setup.blocks,
                                     optimizer=optimizer, path=profile, name=setup.name,
                                     host_link=host_link)
    capture_s = time.perf_counter() - start
    del setup, optimizer
    gc.collect()
    if ns.device.startswith("cuda"):
        torch.cuda.empty_cache()

    plans = {name: plan(ns.sacplan, profile, os.path.join(ns.out, f"bridge_plan_{name}.json"),
                        "--preset", name) for name in PRESETS}
    budget = (plans["none"]["predicted"]["peak_bytes"]
              + plans["full"]["predicted"]["peak_bytes"]) // 2
    # Keep or recompute only; the offload plan below is its own.
    plans["optimal"] = plan(ns.sacplan, profile, os.path.join(ns.out, "bridge_plan_optimal.json"),
                            "--budget", str(budget), "--host-budget", "0")
    if "host_link" in captured["device"]:
        plans["offload"] = plan(ns.sacplan, profile,
                                os.path.join(ns.out, "bridge_plan_offload.json"), "--budget",
                                str(plans["full"]["predicted"]["peak_bytes"]),
                                "--host-budget", "auto")

    report = {"schema": "sacplan.gpu-bridge/1", "setup": ns.setup, "args": ns.kwargs,
              "device": torch.cuda.get_device_name() if ns.device.startswith("cuda")
              else "cpu", "capture_s": capture_s, "optimal_budget_bytes": budget,
              "plans": {}}
    own_argv = list(argv if argv is not None else sys.argv[1:])
    for name, doc in plans.items():
        predicted = {key: doc["predicted"].get(key)
                     for key in ("peak_bytes", "reserved_peak_bytes", "step_ms",
                                 "host_peak_bytes")}
        entry = {"predicted": predicted,
                 **measure_in_child(own_argv,
                                    os.path.join(ns.out, f"bridge_plan_{name}.json"))}
        entry["error"] = {key: ratio(entry["measured"][key], predicted[key])
                          for key in predicted}
        report["plans"][name] = entry
        with open(os.path.join(ns.out, "bridge.json"), "w") as f:
            json.dump(report, f, indent=2)
        err = entry["error"]
        print(f"bridge {name:9s} peak {entry['measured']['peak_bytes'] / 1e9:7.3f} GB "
              f"({err['peak_bytes']:+.2%})  reserved "
              + (f"{err['reserved_peak_bytes']:+.2%}" if err["reserved_peak_bytes"] is not None
                 else "n/a")
              + f"  step {entry['measured']['step_ms']:8.2f} ms ({err['step_ms']:+.2%})",
              flush=True)
    result_path = os.path.join(ns.out, "bridge_auto.json")
    subprocess.run([sys.executable, os.path.abspath(__file__), *own_argv, "--auto-budget",
                    str(budget), "--result", result_path], check=True)
    with open(result_path) as f:
        report["auto"] = json.load(f)
    with open(os.path.join(ns.out, "bridge.json"), "w") as f:
        json.dump(report, f, indent=2)
    auto = report["auto"]
    print(f"bridge auto      kept {auto['chosen']}: step {auto['measured']['step_ms']:8.2f} ms; "
          + "; ".join(auto["notes"][-1:]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

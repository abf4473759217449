"""`python -m sacplan_torch capture|check`: the bridge from the shell.

Both take a training setup as `FILE.py:FUNCTION` (or `MODULE:FUNCTION`):
a function returning sacplan_torch.Setup, called with the `--arg KEY=VALUE`
pairs given (values that read as numbers are passed as numbers).

Under torchrun (RANK and WORLD_SIZE set) both join the process group first
(gloo; nccl when CUDA is available) and every rank runs the setup; capture
then writes one profile per rank, to the -o path with `{rank}` replaced.
"""

from __future__ import annotations

import argparse
import os
import sys

from .capture import capture
from .json_io import check_output_path
from .errors import SacplanError
from .memory import measure_peak
from .plan_doc import load_plan
from .apply import apply_plan
from .setup_spec import load_setup


def _parse_args(pairs):
    kwargs = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SacplanError(f"--arg '{pair}': expected KEY=VALUE")
        for convert in (int, float):
            try:
                value = convert(value)
                break
            except ValueError:
                continue
        kwargs[key] = value
    return kwargs


def _mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:.2f} MB"


def _join_process_group() -> int:
    """Joins torchrun's process group when launched by torchrun; returns
    this process's rank (0 without torchrun)."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return 0
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return dist.get_rank()


def _cmd_capture(ns) -> int:
    rank = _join_process_group()
    many = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if many and "{rank}" not in ns.output:
        raise SacplanError("-o: under torchrun every rank writes its own profile; "
                           "put {rank} in the path (profile.rank{rank}.json)")
    output = check_output_path(ns.output.replace("{rank}", str(rank)))
    setup = load_setup(ns.setup, **_parse_args(ns.arg))
    optimizer = setup.make_optimizer(setup.model) if setup.make_optimizer else None
    profile = capture(setup.model, setup.step, blocks=setup.blocks, optimizer=optimizer,
                      path=output, name=setup.name, warmup=ns.warmup, repeats=ns.repeats,
                      progress=sys.stderr.isatty() and rank == 0, sp=ns.sp)
    ops = len(profile["blocks"][0]["ops"])
    print(f"wrote {output}: {setup.name}, {len(profile['blocks'])} blocks of {ops} ops")
    return 0


def _cmd_check(ns) -> int:
    _join_process_group()
    plan = load_plan(ns.plan)
    setup = load_setup(ns.setup, **_parse_args(ns.arg))
    apply_plan(setup.model, plan, blocks=setup.blocks, model_name=setup.name)
    optimizer = setup.make_optimizer(setup.model) if setup.make_optimizer else None
    result = measure_peak(setup.model, setup.step, optimizer=optimizer, steps=ns.steps)
    for k, loss in enumerate(result.losses):
        print(f"step {k + 1}: loss {loss:.6f}")
    predicted = plan.get("predicted", {})
    line = f"measured {_mb(result.peak_bytes)} peak, {result.step_ms:.1f} ms/step"
    if "peak_bytes" in predicted:
        error = 100.0 * (result.peak_bytes - predicted["peak_bytes"]) / predicted["peak_bytes"]
        line += f"; predicted {_mb(predicted['peak_bytes'])} ({error:+.2f}%)"
        if "step_ms" in predicted:
            line += f", {predicted['step_ms']:.1f} ms/step"
    print(line)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sacplan_torch",
        description="Capture a PyTorch model into sacplan's profile.json, or check a plan "
                    "on it: train under plan.json and print the measured peak beside the "
                    "predicted one.")
    sub = parser.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture", help="run real training steps and write profile.json")
    chk = sub.add_parser("check", help="train under a plan; measured peak vs predicted")
    for p in (cap, chk):
        p.add_argument("--setup", required=True,
                       help="FILE.py:FUNCTION or MODULE:FUNCTION returning sacplan_torch.Setup")
        p.add_argument("--arg", action="append", metavar="KEY=VALUE",
                       help="keyword argument for the setup function (repeatable)")
    cap.add_argument("-o", "--output", required=True, help="profile.json to write")
    cap.add_argument("--warmup", type=int, default=1, help="untimed steps first (default 1)")
    cap.add_argument("--repeats", type=int, default=3,
                     help="timed steps; op times are their medians (default 3)")
    cap.add_argument("--sp", type=int, default=1,
                     help="sequence-parallel degree the blocks run at (default 1)")
    chk.add_argument("--plan", required=True, help="plan.json (sacplan plan --semantics torch-sac)")
    chk.add_argument("--steps", type=int, default=3,
                     help="measured steps after one warm-up step (default 3)")
    ns = parser.parse_args(argv)
    try:
        return _cmd_capture(ns) if ns.command == "capture" else _cmd_check(ns)
    except SacplanError as exc:
        print(f"sacplan_torch: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the setup's own code may raise anything
        # One line, as for bad input: what failed, not a traceback.
        print(f"sacplan_torch: error: {SacplanError(f'{type(exc).__name__}: {exc}')}",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

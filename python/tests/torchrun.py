"""Launches a test worker on CPU ranks with torchrun (gloo), bounded in time,
and compares what the ranks trained with one process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch


def torchrun(worker: Path, ranks: int, args, port: int, timeout_s: int) -> None:
    """Runs `worker` on `ranks` processes, one intra-op thread each (the
    machine has 2 cores); a timeout or a failing rank fails the calling test
    with the ranks' last lines."""
    # PYTHONFAULTHANDLER: a rank that dies of SIGSEGV or SIGABRT prints
    # where it was.
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONFAULTHANDLER="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ranks),
           "--master_addr", "127.0.0.1", "--master_port", str(port), str(worker),
           *map(str, args)]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"torchrun did not finish in {timeout_s} s:\n{exc.stdout}\n{exc.stderr}")
    if proc.returncode != 0:
        # The ranks' own errors, then the launcher's summary as it printed it:
        # a rank killed by a signal leaves no traceback, only the summary's
        # exitcode and signal name.
        lines = (proc.stdout + proc.stderr).splitlines()
        errors = [l for l in lines if l.startswith("[rank") or "Error" in l]
        pytest.fail(f"torchrun exited {proc.returncode}:\n" + "\n".join(errors[-40:])
                    + "\n--- last lines ---\n" + "\n".join(lines[-30:]))


def assert_close(actual, expected, what: str, rtol: float) -> None:
    """`rtol` relative, elementwise, with 1e-5 of the tensor's own scale as the
    floor for elements near zero: the ranks sum partial results in another
    order than one process does."""
    torch.testing.assert_close(actual, expected, rtol=rtol,
                               atol=1e-5 * float(expected.abs().max()),
                               msg=lambda m: f"{what}: {m}")


def assert_same_steps(got: dict, expected: dict, steps: int, rtol: float) -> None:
    """Every step's loss and every parameter gradient (each nonzero in the
    reference, so that a gradient lost on the ranks cannot pass) agree."""
    for step in range(steps):
        assert_close(torch.tensor(got["losses"][step]), torch.tensor(expected["losses"][step]),
                     f"step {step} loss", rtol)
        assert got["grads"][step].keys() == expected["grads"][step].keys()
        for name, grad in expected["grads"][step].items():
            assert torch.count_nonzero(grad) > 0, name
            assert_close(got["grads"][step][name], grad, f"step {step} grad of {name}", rtol)

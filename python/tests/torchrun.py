"""Launches a test worker on CPU ranks with torchrun (gloo), bounded in time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def torchrun(worker: Path, ranks: int, args, port: int, timeout_s: int) -> None:
    """Runs `worker` on `ranks` processes, one intra-op thread each (the
    machine has 2 cores); a timeout or a failing rank fails the calling test
    with the ranks' last lines."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ranks),
           "--master_addr", "127.0.0.1", "--master_port", str(port), str(worker),
           *map(str, args)]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"torchrun did not finish in {timeout_s} s:\n{exc.stdout}\n{exc.stderr}")
    if proc.returncode != 0:
        lines = [l for l in (proc.stdout + proc.stderr).splitlines()
                 if l.startswith("[rank") or "Error" in l]
        pytest.fail(f"torchrun exited {proc.returncode}:\n" + "\n".join(lines[-60:]))

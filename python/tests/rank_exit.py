"""How a torchrun test worker ends: without Python's interpreter shutdown.

A gloo process group's worker thread can still hold its last finished
collective (a barrier holds the collectives issued before it) after the rank
has returned from waiting on it. When the thread lets go, the tensors it
drops may be the last references to Python objects, and it takes the GIL to
release them. If that happens while the interpreter is shutting down, the
thread is unwound by pthread_exit through a noexcept destructor and the rank
dies of SIGABRT ("terminate called without an active exception"), after
its results were written. On a loaded 2-core machine that lost about one run
in ten of fsdp_worker.py (core dump: ProcessGroupGloo::runLoop ->
~AsyncBarrierWork -> decref_pyobject -> take_gil). The workers write their
results and destroy the process group first; then nothing is left that
shutdown would do for them.
"""

from __future__ import annotations

import os
import sys


def exit_rank(status: int) -> None:
    """Flushes the rank's output and ends the process with `status`, skipping
    interpreter shutdown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)

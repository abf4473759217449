"""Captured profiles with times that do not depend on the machine's load.

Which plan the solver picks follows the captured times, and a capture on a
loaded machine (CI runs two pytest workers on two cores) can measure an op
several times slower than usual. A test that needs a plan of some shape
(test_offload: one that offloads from a checkpointed block) plans on
steady_times(profile) and still simulates and measures that plan against
the capture itself: bytes, not times, decide a peak.
"""

from __future__ import annotations

import copy

# Optional per-op times of PyTorch's selective checkpointing; absent, the
# planner takes an ideal checkpoint (docs/profile_format.md).
TORCH_SAC_TIMES = ("checkpointed_fwd_ms", "saved_fwd_ms", "checkpointed_bwd_ms",
                   "recompute_ms", "replay_ms")


def steady_times(profile: dict) -> dict:
    """The profile with each op's times set by the bytes it writes (1 us per
    KiB, plus 1 us; backward twice forward where the op has one) and no
    measured checkpoint overheads: times that rank plans the same way on
    every machine."""
    steady = copy.deepcopy(profile)
    for block in steady["blocks"]:
        for op in block["ops"]:
            forward_ms = 1e-3 * (1 + sum(out["bytes"] for out in op["outputs"]) / 1024)
            op["fwd_ms"] = forward_ms
            op["bwd_ms"] = 2 * forward_ms if op["bwd_ms"] > 0 else 0.0
            for key in TORCH_SAC_TIMES:
                op.pop(key, None)
    return steady

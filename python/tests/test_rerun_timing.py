"""RerunTimes.per_op_ms: per-op medians scaled so that a block's ops add up
to its median segment. Each segment here has one slow sample (a pause) that
falls on a different op each time: every op's median leaves it out, yet
every segment pays it."""

from __future__ import annotations

import pytest

from sacplan_torch.rerun_timing import RerunTimes

OPS = ("a", "b", "c", "d")


def times_with_one_pause_per_segment(pause_ms: float) -> RerunTimes:
    samples = {op: [] for op in OPS}
    spans = []
    for segment, paused in enumerate(OPS):
        shares = {op: 1.0 + (pause_ms if op == paused else 0.0) + 0.01 * segment
                  for op in OPS}
        for op, ms in shares.items():
            samples[op].append(ms)
        spans.append(sum(shares.values()))
    return RerunTimes({"recompute_ms": [samples]}, {"recompute_ms": [spans]}, [])


def test_medians_are_scaled_up_to_the_median_segment():
    times = times_with_one_pause_per_segment(pause_ms=2.0)
    per_op = times.per_op_ms("recompute_ms", 0)
    # Medians alone: about 1 ms each, 4 ms in all, while every segment took 6.
    assert sum(per_op.values()) == pytest.approx(4 * 1.015 + 2.0)
    assert per_op["a"] == pytest.approx(per_op["d"], rel=0.02)


def test_never_scaled_down():
    # Each segment has one op that happened to be fast: every op's median is
    # 1 ms (4 in all) while every segment took 3. Medians stand as they are.
    samples = {op: [0.0 if op == fast else 1.0 for fast in OPS] for op in OPS}
    times = RerunTimes({"recompute_ms": [samples]}, {"recompute_ms": [[3.0] * len(OPS)]}, [])
    assert times.per_op_ms("recompute_ms", 0) == pytest.approx({op: 1.0 for op in OPS})

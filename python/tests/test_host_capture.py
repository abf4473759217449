"""Host times, device times and syncs in capture's profile (docs/python.md,
"Host and device times").

On a GPU capture reads two clocks: the host's wall clock and the device's.
The CUDA parts cannot run here; the two-clock path runs on a CPU through
clock.Clocks, with the wall clock as the host's and the process CPU clock
as the device's. A block that sleeps in Python costs the host (wall) time
and the device (process) none: what a GPU's host spends on dispatch and
the checkpoint policy while the device waits."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import pytest
import torch
from torch import nn

import sacplan_torch
from sacplan_torch import device_times, sync_ops
from sacplan_torch.clock import Clock, Clocks, WallClock
from sacplan_torch.device_times import kernel_ms_by_range
from sacplan_torch.host_memory import available_host_memory_bytes
from sacplan_torch.host_times import HOST_FIELDS

DIM, TOKENS = 16, 8
SLEEP_S = 0.004


class Block(nn.Module):
    def __init__(self, how: str = "plain"):
        super().__init__()
        self.linear = nn.Linear(DIM, DIM)
        self.how = how

    def forward(self, x):
        h = torch.tanh(self.linear(x))
        if self.how == "sleep":
            time.sleep(SLEEP_S)  # host work the device does not see
        elif self.how == "item":
            scale = h.abs().sum()
            if scale.item() < 0:  # reads a device value on the host
                h = -h
        elif self.how == "nonzero":
            h = h + torch.nonzero(h > 0).shape[0] * 0.0
        return x + h


def capture(how: str, monkeypatch=None, **kwargs) -> dict:
    if monkeypatch is not None:
        monkeypatch.setattr(Clocks, "for_device", classmethod(
            lambda cls, device: cls(Clock(device), WallClock())))
    torch.manual_seed(0)
    model = nn.Sequential(Block(how), Block(how))
    return sacplan_torch.capture(model, torch.randn(TOKENS, DIM),
                                 blocks=lambda name, m: isinstance(m, Block),
                                 warmup=1, repeats=2, **kwargs)


@pytest.fixture(scope="module")
def two_clock_profile():
    with pytest.MonkeyPatch.context() as monkeypatch:
        return capture("sleep", monkeypatch)


def test_every_op_gets_host_times_on_two_clocks(two_clock_profile):
    for block in two_clock_profile["blocks"]:
        for op in block["ops"]:
            assert set(op["host"]) == set(HOST_FIELDS), op["id"]
            for field, ms in op["host"].items():
                assert math.isfinite(ms) and ms >= 0, (op["id"], field, ms)
    fixed_host = two_clock_profile["fixed"]["host"]
    assert set(fixed_host) == {"head_fwd_ms", "head_bwd_ms", "optimizer_ms"}
    assert all(math.isfinite(ms) and ms >= 0 for ms in fixed_host.values())


def test_host_times_see_what_the_device_clock_does_not(two_clock_profile):
    # The sleep is in every forward of the block and in every re-run: the
    # host's forward, checkpointed forward and recompute each hold it, the
    # device's (process CPU time) do not.
    for block in two_clock_profile["blocks"]:
        ops = block["ops"]
        for field in ("fwd_ms", "checkpointed_fwd_ms", "saved_fwd_ms", "recompute_ms"):
            host_ms = sum(op["host"][field] for op in ops)
            device_ms = sum(op[field] for op in ops)
            assert host_ms >= 0.9 * SLEEP_S * 1e3, (field, host_ms)
            assert device_ms < host_ms / 2, (field, device_ms, host_ms)
        # The backward does not run the block's Python: no sleep there.
        assert sum(op["host"]["bwd_ms"] for op in ops) < SLEEP_S * 1e3


def test_a_profile_with_host_times_plans(two_clock_profile):
    plan = sacplan_torch.plan(two_clock_profile, budget="1GB")
    assert plan["predicted"]["step_ms"] > 0


def test_one_clock_writes_no_host_times():
    profile = capture("plain")
    expected = {"id", "kind", "aten", "inputs", "outputs", "backward_needs", "fwd_ms",
                "bwd_ms", "workspace_bytes", "bwd_workspace_bytes", "param_bytes",
                "checkpointed_fwd_ms", "saved_fwd_ms", "checkpointed_bwd_ms",
                "recompute_ms", "replay_ms"}
    for block in profile["blocks"]:
        for op in block["ops"]:
            assert set(op) == expected, op["id"]
    assert "host" not in profile["fixed"]
    assert set(profile["device"]) == {"name", "memory_bytes"}


def test_item_marks_the_op_issued_before_it():
    profile = capture("item")
    for block in profile["blocks"]:
        synced = [op["id"] for op in block["ops"] if op.get("syncs")]
        # .item() makes no op (it returns a number): the host waits after
        # the sum it reads, the last op issued.
        assert synced == ["sum"], synced


def test_nonzero_syncs():
    profile = capture("nonzero")
    for block in profile["blocks"]:
        synced = [op["id"] for op in block["ops"] if op.get("syncs")]
        assert synced == ["nonzero"], synced


def test_syncs_by_form():
    aten = torch.ops.aten
    x = torch.arange(6.0)
    repeats = torch.tensor([1, 2, 0, 1, 1, 1])
    assert sync_ops.syncs(aten.repeat_interleave.Tensor, (repeats,), {}, None)
    assert not sync_ops.syncs(aten.repeat_interleave.Tensor, (repeats,), {"output_size": 6}, None)
    assert not sync_ops.syncs(aten.repeat_interleave.self_int, (x, 2), {}, None)
    assert sync_ops.syncs(aten.index.Tensor, (x, [x > 2]), {}, None)
    assert not sync_ops.syncs(aten.index.Tensor, (x, [repeats]), {}, None)
    assert sync_ops.syncs(aten._unique2.default, (x,), {}, None)
    assert sync_ops.syncs(aten.masked_select.default, (x, x > 2), {}, None)
    # On a CPU a copy to the host has no device to wait for.
    assert not sync_ops.syncs(aten._to_copy.default, (x,), {"device": "cpu"}, x.clone())
    assert not sync_ops.syncs(aten.copy_.default, (x.clone(), x), {}, None)
    assert not sync_ops.syncs(aten.mm.default, (x[None], x[:, None]), {}, None)


def test_kernel_ms_by_range_reads_host_ranges_only():
    cpu, cuda = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA
    events = [SimpleNamespace(name="sacplan#0", device_type=cpu, device_time_total=1500.0),
              # The same range as the device lists it: not a kernel sum.
              SimpleNamespace(name="sacplan#0", device_type=cuda, device_time_total=9000.0),
              SimpleNamespace(name="sacplan#phase:forward", device_type=cpu,
                              device_time_total=4000.0),
              SimpleNamespace(name="aten::mm", device_type=cpu, device_time_total=1500.0)]
    assert kernel_ms_by_range(events) == {"sacplan#0": 1.5, "sacplan#phase:forward": 4.0}


def test_host_link_gets_offloads_per_tensor_host_costs():
    profile = capture("plain", host_link={"d2h_gbps": 10, "h2d_gbps": 10})
    link = profile["device"]["host_link"]
    for key in ("offload_host_us", "fetch_host_us"):
        # Positive (every pack takes a buffer and copies) and sane: a hook
        # that took 10 ms per tensor would be broken.
        assert 0 < link[key] < 10_000, (key, link[key])
    # The copy engine's setup is measured on CUDA only.
    assert "copy_setup_us" not in link
    assert capture("plain")["device"].keys() == {"name", "memory_bytes"}


def test_given_per_copy_costs_are_kept():
    given = {"d2h_gbps": 10, "h2d_gbps": 10, "offload_host_us": 7, "fetch_host_us": 0}
    link = capture("plain", host_link=given)["device"]["host_link"]
    assert link == {"d2h_gbps": 10.0, "h2d_gbps": 10.0, "host_memory_bytes": 0,
                    "offload_host_us": 7.0, "fetch_host_us": 0.0}
    with pytest.raises(sacplan_torch.SacplanError,
                       match=r"host_link\.fetch_host_us: expected a non-negative number"):
        capture("plain", host_link=dict(given, fetch_host_us=-1))


def test_available_host_memory_is_the_c_reading_over_the_gpus(monkeypatch):
    # The C++ reading (its MemAvailable parsing is tested in tests/api),
    # shared among the GPUs (all of it without one).
    monkeypatch.setenv("SACPLAN_HOST_AVAILABLE_BYTES", "32000000000")
    gpus = max(torch.cuda.device_count() if torch.cuda.is_available() else 0, 1)
    assert available_host_memory_bytes() == 32000000000 // gpus
    monkeypatch.setenv("SACPLAN_HOST_AVAILABLE_BYTES", "lots")
    assert available_host_memory_bytes() == 0


@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_kernel_time_ranges_enclose_each_ops_aten_calls(monkeypatch):
    # The CUDA path on a CPU: the op-times step under torch.profiler, each
    # op's forward and backward in a range of its own. No kernels run here
    # (every device time is 0); what kernel attribution needs is checked:
    # every range holds the aten calls that would launch them, on the
    # range's own thread (not async), backward included.
    ranges = []
    real = device_times.kernel_ms_by_range

    def spy(events, prefix=device_times._PREFIX):
        events = list(events)
        ranges.extend(e for e in events if e.name.startswith(prefix)
                      and e.device_type == torch.autograd.DeviceType.CPU)
        return real(events, prefix)

    monkeypatch.setattr(device_times, "kernel_ms_by_range", spy)
    monkeypatch.setattr(Clocks, "for_device", classmethod(
        lambda cls, device: cls(Clock(device), WallClock(), kernel_times=True)))
    torch.manual_seed(0)
    model = nn.Sequential(Block(), Block())
    profile = sacplan_torch.capture(model, torch.randn(TOKENS, DIM), warmup=1, repeats=1,
                                    blocks=lambda name, m: isinstance(m, Block))
    ops = [op for block in profile["blocks"] for op in block["ops"]]
    per_op = [r for r in ranges if not r.name.startswith(device_times._PHASE)]
    # One range per op's forward and at least one per op's backward.
    assert len(per_op) >= 2 * len(ops)
    assert all(r.cpu_children and not r.is_async for r in per_op)
    assert {r.name for r in ranges} >= {device_times._PHASE + p
                                       for p in ("forward", "backward", "optimizer")}
    for op in ops:
        assert set(op["host"]) == set(HOST_FIELDS)
        # The checkpointed device fields are the plain ones.
        assert op["recompute_ms"] == op["checkpointed_fwd_ms"] == op["fwd_ms"]
        assert op["replay_ms"] == 0 and op["checkpointed_bwd_ms"] == op["bwd_ms"]

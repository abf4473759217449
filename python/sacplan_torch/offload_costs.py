"""Offload's per-tensor costs, for `device.host_link` (docs/profile_format.md):

- offload_host_us: the host's time to send one tensor to host memory: the
  pack hook offload.py's SavedOffload installs (mark the storage, take a
  pinned buffer, on CUDA a side-stream copy launch, record_stream and an
  event record);
- fetch_host_us: the host's time to bring one back: the unpack hook (a
  device buffer, the compute stream's wait on the copy's event, the copy
  launch);
- copy_setup_us (CUDA only): the copy engine's fixed time per copy before
  its bytes move.

Measured by running offload.py's own pack and unpack over COUNT small
tensors, after one round that warms the pinned-memory cache: on CUDA on the
wall clock (the host's; the copies themselves run on the device), on CPU on
the process clock, where the copies are done when issued and only the
hooks' costs are seen (the tensors are small, so the copies add little).
copy_setup_us: COUNT tiny pinned copies each way on the device, timed with
CUDA events behind a spin kernel (so the host has issued every copy before
the first starts and no host gap is counted), less their bytes at the
link's rate; the mean of both ways.
"""

from __future__ import annotations

import statistics
import time
from typing import Dict

import torch

from .clock import cpu_now
from .memory import sync
from .offload import BlockCopies, HostPool, SavedOffload, _unpack
from . import planner

COUNT = 64
NBYTES = 4096
# About 5 ms of spin on a 2 GHz GPU: far longer than issuing COUNT copies.
_SPIN_CYCLES = 10_000_000


def host_costs_us(device: torch.device, count: int = COUNT,
                  nbytes: int = NBYTES) -> Dict[str, float]:
    """offload_host_us and fetch_host_us on `device` (module doc)."""
    now = time.perf_counter if device.type == "cuda" else cpu_now
    tensors = [torch.full((nbytes,), k % 251, dtype=torch.uint8, device=device)
               for k in range(count)]
    pool = HostPool()
    for _ in range(2):  # the first round fills the pinned-memory cache
        saved = SavedOffload(pool, [], BlockCopies(plain=True, defer=False))
        sync(device)
        t0 = now()
        packed = []
        for t in tensors:
            saved.mark(t)
            packed.append(saved._pack(t))
        t1 = now()
        sync(device)
        t2 = now()
        back = [_unpack(p) for p in packed]
        t3 = now()
        sync(device)
        if not all(torch.equal(a, b) for a, b in zip(back, tensors)):
            raise AssertionError("offload's round trip changed a tensor")
        del back, packed, saved
    return {"offload_host_us": round((t1 - t0) * 1e6 / count, 3),
            "fetch_host_us": round((t3 - t2) * 1e6 / count, 3)}


def copy_setup_us(device: torch.device, link: Dict[str, float], count: int = COUNT,
                  nbytes: int = NBYTES) -> float:
    """The copy engine's fixed time per copy on CUDA `device` (module doc)."""
    host = [torch.empty(nbytes, dtype=torch.uint8, pin_memory=True) for _ in range(count)]
    dev = [torch.empty(nbytes, dtype=torch.uint8, device=device) for _ in range(count)]
    setups = []
    for key, pairs in (("d2h_gbps", list(zip(host, dev))), ("h2d_gbps", list(zip(dev, host)))):
        for dst, src in pairs:
            dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize(device)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(_SPIN_CYCLES)
        start.record()
        for dst, src in pairs:
            dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        # The planner's copy time, inverted (HostLink::CopySetupUs).
        setups.append(planner.copy_setup_us(start.elapsed_time(end) / count, nbytes,
                                            link[key]))
    return round(statistics.mean(setups), 3)


def with_copy_costs(device: torch.device, link: Dict[str, float]) -> Dict[str, float]:
    """`link` with the per-copy costs it does not give, measured."""
    out = dict(link)
    missing = {"offload_host_us", "fetch_host_us"} - set(out)
    if missing:
        measured = host_costs_us(device)
        out.update({key: measured[key] for key in missing})
    if device.type == "cuda" and "copy_setup_us" not in out:
        out["copy_setup_us"] = copy_setup_us(device, out)
    return out

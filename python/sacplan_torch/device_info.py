"""The profile's "device" object: the device's name and memory, and its
link to host memory (over which a plan may offload), measured on a GPU or
given by the caller (docs/profile_format.md, "device")."""

from __future__ import annotations

import math
import os
from typing import Mapping, Optional

import torch

from .errors import SacplanError


def _host_memory_bytes() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def checked_host_link(link: Mapping[str, float]) -> dict:
    """capture's `host_link` argument as the profile's `device.host_link`;
    SacplanError naming the key for anything but positive rates and a
    byte count."""
    if not isinstance(link, Mapping):
        raise SacplanError(f"host_link: expected a dict, not {type(link).__name__}")
    unknown = sorted(set(link) - {"d2h_gbps", "h2d_gbps", "host_memory_bytes"})
    if unknown:
        raise SacplanError(f"host_link: unknown key '{unknown[0]}' (d2h_gbps, h2d_gbps, "
                           "host_memory_bytes)")
    out = {}
    for key in ("d2h_gbps", "h2d_gbps", "host_memory_bytes"):
        value = link.get(key, 0 if key == "host_memory_bytes" else None)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value) or value < 0 or (value == 0 and key != "host_memory_bytes"):
            raise SacplanError(f"host_link.{key}: expected a positive number, not {value!r}")
        out[key] = int(value) if key == "host_memory_bytes" else float(value)
    return out


def _measured_host_link(device: torch.device) -> dict:
    """One pinned copy of 256 MiB each way, after one to warm up: the rate
    of a copy engine, which is what the simulator queues copies at."""
    nbytes = 256 << 20
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    on_device = torch.empty(nbytes, dtype=torch.uint8, device=device)
    rates = {}
    for key, dst, src in (("d2h_gbps", host, on_device), ("h2d_gbps", on_device, host)):
        dst.copy_(src, non_blocking=True)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        rates[key] = round(nbytes / (start.elapsed_time(end) * 1e6), 3)
    rates["host_memory_bytes"] = _host_memory_bytes() // max(torch.cuda.device_count(), 1)
    return rates


def device_info(device: torch.device, host_link: Optional[Mapping[str, float]]) -> dict:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info = {"name": props.name, "memory_bytes": int(props.total_memory),
                "host_link": _measured_host_link(device)}
    else:
        info = {"name": "cpu", "memory_bytes": _host_memory_bytes()}
    if host_link is not None:
        info["host_link"] = host_link
    return info

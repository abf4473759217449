"""The profile's "device" object: the device's name and memory, and its
link to host memory (over which a plan may offload), measured on a GPU or
given by the caller (docs/profile_format.md, "device")."""

from __future__ import annotations

import math
import os
from typing import Mapping, Optional

import torch

from .errors import SacplanError
from .host_memory import available_host_memory_bytes
from .offload_costs import with_copy_costs


def _physical_memory_bytes() -> int:
    """The machine's RAM: a CPU device's memory."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


_RATES = ("d2h_gbps", "h2d_gbps")
# Optional, >= 0: measured by capture when not given (offload_costs.py).
_OPTIONAL = ("host_memory_bytes", "offload_host_us", "fetch_host_us", "copy_setup_us")


def checked_host_link(link: Mapping[str, float]) -> dict:
    """capture's `host_link` argument as the profile's `device.host_link`;
    SacplanError naming the key for anything but positive rates and
    non-negative optional figures."""
    if not isinstance(link, Mapping):
        raise SacplanError(f"host_link: expected a dict, not {type(link).__name__}")
    unknown = sorted(set(link) - set(_RATES) - set(_OPTIONAL))
    if unknown:
        raise SacplanError(f"host_link: unknown key '{unknown[0]}' "
                           f"({', '.join(_RATES + _OPTIONAL)})")
    out = {}
    for key in _RATES + _OPTIONAL:
        if key in _OPTIONAL and key not in link:
            if key == "host_memory_bytes":
                out[key] = 0
            continue
        value = link.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value) or value < 0 or (value == 0 and key in _RATES):
            kind = "a positive" if key in _RATES else "a non-negative"
            raise SacplanError(f"host_link.{key}: expected {kind} number, not {value!r}")
        out[key] = int(value) if key == "host_memory_bytes" else float(value)
    return out


def _measured_host_link(device: torch.device) -> dict:
    """One pinned copy of 256 MiB each way, after one to warm up: the rate
    of a copy engine, which is what the simulator queues copies at; and
    the host memory available to this device now (host_memory.py)."""
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
    rates["host_memory_bytes"] = available_host_memory_bytes()
    return rates


def device_info(device: torch.device, host_link: Optional[Mapping[str, float]]) -> dict:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info = {"name": props.name, "memory_bytes": int(props.total_memory),
                "host_link": _measured_host_link(device)}
    else:
        info = {"name": "cpu", "memory_bytes": _physical_memory_bytes()}
    if host_link is not None:
        info["host_link"] = host_link
    if "host_link" in info:
        info["host_link"] = with_copy_costs(device, info["host_link"])
    return info

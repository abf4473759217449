"""Host memory available to this process's device, now: what pinned
offload copies may fill. One reading, the C++ one (sacplan/api/
host_memory.h: $SACPLAN_HOST_AVAILABLE_BYTES, else MemAvailable of
/proc/meminfo, else the free pages), for capture's measured host link
(`device.host_link.host_memory_bytes`) and for apply_plan's check before a
plan pins memory (docs/memory_model.md, "Offload")."""

from __future__ import annotations

from typing import Any, Dict

import torch

from .errors import SacplanError


def _extension():
    from .planner import _planner
    return _planner()


def gpus_on_node() -> int:
    """The GPUs the host's memory is shared among: CUDA's device count, 1
    without any."""
    return max(torch.cuda.device_count() if torch.cuda.is_available() else 0, 1)


def available_host_memory_bytes() -> int:
    """The host memory available now over the node's GPUs, in bytes; 0
    where it cannot be read (not Linux, no sysconf)."""
    try:
        return int(_extension().available_host_bytes()) // gpus_on_node()
    except Exception:  # PlannerError: neither source answers
        return 0


def pinned_host_bytes(nbytes: int) -> int:
    """What PyTorch's pinned host allocator takes for `nbytes`: the next
    power of two (the planner counts offloaded tensors so)."""
    return int(_extension().pinned_host_bytes(int(nbytes)))


def check_host_fits(plan: Dict[str, Any]) -> None:
    """SacplanError, one line naming both figures, when the plan's predicted
    host peak (pinned bytes) exceeds the host memory available now over the
    node's GPUs; nothing for a plan that offloads nothing."""
    host_bytes = int((plan.get("predicted") or {}).get("host_peak_bytes") or 0)
    if host_bytes <= 0:
        return
    extension = _extension()
    try:
        extension.check_host_fits(host_bytes, gpus_on_node())
    except extension.PlannerError as exc:
        message = str(exc).replace("--host-budget auto or a smaller --host-budget",
                                   'host_budget="auto" or a smaller host_budget')
        raise SacplanError(message) from None

"""Host memory available to this process's device, now: what pinned
offload copies may fill. One reading for capture's measured host link
(`device.host_link.host_memory_bytes`) and for the check before an applied
plan pins memory (docs/memory_model.md, host memory rule)."""

from __future__ import annotations

import torch

MEMINFO = "/proc/meminfo"


def available_host_memory_bytes(meminfo: str = MEMINFO) -> int:
    """`MemAvailable` of /proc/meminfo (what the kernel can give without
    swapping: free memory plus the page cache it can drop) divided among
    the node's GPUs (1 without any), in bytes; 0 where it cannot be read
    (no /proc: not Linux). Physical RAM would count memory the process,
    its data loader and the page cache already hold."""
    try:
        with open(meminfo) as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        kib = int(fields["MemAvailable"].split()[0])
    except (OSError, KeyError, ValueError, IndexError):
        return 0
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return kib * 1024 // max(gpus, 1)

"""Offload's host copies: a tensor copied to host memory and back
(HostCopy; on CUDA to pinned memory on a side stream), and the pool that
counts what an applied plan holds there (HostPool). sacplan_torch.offload
decides what is copied and when."""

from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, List, Optional

import torch

from .host_memory import pinned_host_bytes

class HostPool:
    """Host memory an applied plan holds: `live_bytes` now, `peak_bytes` the
    most at once since the plan was applied, each copy counted as PyTorch's
    pinned allocator takes it (host_memory.pinned_host_bytes), as the plan's
    host_peak_bytes counts it; on CPU too, where the copy is plain memory."""

    def __init__(self) -> None:
        self.live_bytes = 0
        self.peak_bytes = 0
        self._streams: Dict[torch.device, Any] = {}

    def _hold(self, owner: Any, nbytes: int) -> None:
        nbytes = pinned_host_bytes(nbytes)
        self.live_bytes += nbytes
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        weakref.finalize(owner, self._release, nbytes)

    def _release(self, nbytes: int) -> None:
        self.live_bytes -= nbytes

    def copies_issued(self):
        """On CUDA, an event recorded after every copy issued so far; None
        when none was (on CPU copies are done when issued)."""
        event = None
        for stream in self._streams.values():
            event = torch.cuda.Event()
            event.record(stream)
        return event

    def _copy_stream(self, device: torch.device):
        if device not in self._streams:
            self._streams[device] = torch.cuda.Stream(device)
        return self._streams[device]

    def store(self, t: torch.Tensor, deferred: Optional[List["HostCopy"]] = None) -> "HostCopy":
        """Copies `t` to the host, or, with `deferred`, appends the copy
        there to be issued later (HostCopy.issue), holding `t` until then.
        Once issued, the copy does not refer to `t`. The host memory is held
        from now."""
        t = t.detach()
        nbytes = t.numel() * t.element_size()
        if t.device.type == "cuda":
            host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
            self._hold(host, nbytes)
            copy = HostCopy(host, t, self._copy_stream)
        else:
            import numpy

            buffer = numpy.empty(nbytes, dtype=numpy.uint8)
            self._hold(buffer, nbytes)
            copy = HostCopy(torch.from_numpy(buffer).view(t.dtype).view(t.shape), t, None)
        copy.pending = t
        if deferred is None:
            copy.issue()
        else:
            deferred.append(copy)
        return copy


class HostCopy:
    """A tensor's host copy, and what it takes to rebuild it on its device.
    `pending`: the device tensor, until the copy to the host is issued."""

    __slots__ = ("host", "shape", "stride", "device", "done", "stream_for", "pending",
                 "__weakref__")

    def __init__(self, host: torch.Tensor, original: torch.Tensor,
                 stream_for: Optional[Callable[[torch.device], Any]]) -> None:
        self.host = host
        self.shape = original.shape
        self.stride = original.stride()
        self.device = original.device
        self.done = None  # on CUDA: the event the copy to the host records
        self.stream_for = stream_for
        self.pending: Optional[torch.Tensor] = None

    def issue(self) -> None:
        """Copies the pending tensor to the host (on CUDA on the side
        stream, after what compute has issued) and lets it go."""
        t, self.pending = self.pending, None
        if t is None:
            return
        if self.stream_for is None:
            self.host.copy_(t)
            return
        stream = self.stream_for(t.device)
        stream.wait_stream(torch.cuda.current_stream(t.device))
        with torch.cuda.stream(stream):
            self.host.copy_(t, non_blocking=True)
        # The device buffer may go back to the allocator before the copy
        # ends: keep it from being reused until then.
        t.record_stream(stream)
        self.done = torch.cuda.Event()
        self.done.record(stream)

    def to_device(self) -> torch.Tensor:
        """The tensor back on its device, copied on the current stream."""
        self.issue()
        out = torch.empty_strided(self.shape, self.stride, dtype=self.host.dtype,
                                  device=self.device)
        if self.done is not None:
            torch.cuda.current_stream(self.device).wait_event(self.done)
        out.copy_(self.host, non_blocking=True)
        return out

    def to_device_async(self) -> "_Arriving":
        """The copy back issued now; on CUDA on a side stream, for the
        compute stream to wait for when it needs the tensor."""
        self.issue()
        if self.done is None:
            return _Arriving(self.to_device(), None)
        stream = self.stream_for(self.device)
        stream.wait_event(self.done)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            out = torch.empty_strided(self.shape, self.stride, dtype=self.host.dtype,
                                      device=self.device)
            out.copy_(self.host, non_blocking=True)
            arrived = torch.cuda.Event()
            arrived.record(stream)
        # Allocated on the side stream, read on the compute stream.
        out.record_stream(torch.cuda.current_stream(self.device))
        return _Arriving(out, arrived)


class _Arriving:
    """A tensor being copied back; `wait()` makes the compute stream wait."""

    __slots__ = ("tensor", "arrived")

    def __init__(self, tensor: torch.Tensor, arrived) -> None:
        self.tensor, self.arrived = tensor, arrived

    def wait(self) -> torch.Tensor:
        if self.arrived is not None:
            torch.cuda.current_stream(self.tensor.device).wait_event(self.arrived)
        return self.tensor

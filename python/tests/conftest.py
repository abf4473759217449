"""Shared pytest fixtures for the sacplan_torch tests."""

from __future__ import annotations

import socket

import pytest


@pytest.fixture(scope="module")
def free_port() -> int:
    """A TCP port on localhost that nothing listened on when asked (one per
    test module, so module-scoped fixtures can launch torchrun with it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]

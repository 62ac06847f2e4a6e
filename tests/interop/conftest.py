"""Fixtures of the interop scenarios (the targets themselves are in tests/conftest.py)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from sidewinder.remoting.client import SyncRemotingClient


@pytest.fixture(scope="module")
def client() -> Iterator[SyncRemotingClient]:
    """Our blocking remoting client, for raw requests to any target's name server or broker."""
    remoting = SyncRemotingClient()
    yield remoting
    remoting.close()


@pytest.fixture
def refused() -> Iterator[str]:
    """A loopback address that refuses connections: the port is bound but never listened on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def silent() -> Iterator[str]:
    """A loopback address that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"127.0.0.1:{sock.getsockname()[1]}"

"""Fixtures of the interop scenarios (the targets themselves are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sidewinder.remoting.client import SyncRemotingClient


@pytest.fixture(scope="module")
def client() -> Iterator[SyncRemotingClient]:
    """Our blocking remoting client, for raw requests to any target's name server or broker."""
    remoting = SyncRemotingClient()
    yield remoting
    remoting.close()

"""The port leases of interop/ports.py: outside the ephemeral range, never handed out twice
while their owner lives, taken over when it is gone, never a bound port."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from interop.ports import (
    PortLeases,
    PortsExhausted,
    ephemeral_range,
    leasable_ranges,
    lease_port_block,
)

REPO = Path(__file__).resolve().parents[2]


def a_free_range(width: int) -> tuple[int, int]:
    """`width` ports of the leasable pool that nothing is bound to now."""
    first_range = leasable_ranges()[0]
    start = first_range[0] + 7000  # away from where most leases begin
    while not all(_unbound(port) for port in range(start, start + width)):
        start += width
        assert start + width <= first_range[1]
    return start, start + width - 1


def _unbound(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def lease_in_child(directory: Path, pool: tuple[int, int], count: int) -> subprocess.Popen[str]:
    """A process that leases `count` blocks (-2, 0, 1) from `pool`, prints them, then waits
    for a line on stdin before it exits (its leases in force until then)."""
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from interop.ports import PortLeases\n"
        f"leases = PortLeases(Path({str(directory)!r}), [{pool!r}])\n"
        f"print(json.dumps([leases.lease((-2, 0, 1)) for _ in range({count})]), flush=True)\n"
        "sys.stdin.readline()\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_leased_ports_lie_outside_the_ephemeral_range() -> None:
    low, high = ephemeral_range()
    for offsets in [(0,), (-2, 0, 1), (0, 1)]:
        base = lease_port_block(offsets)
        for port in (base + offset for offset in offsets):
            assert not low <= port <= high, (port, (low, high))
            assert any(first <= port <= last for first, last in leasable_ranges())


def test_the_pool_leaves_out_the_ephemeral_range() -> None:
    assert leasable_ranges((32768, 60999)) == [(20000, 32767), (61000, 65535)]
    assert leasable_ranges((1024, 65535)) == []
    with pytest.raises(PortsExhausted, match="ephemeral"):
        PortLeases(Path("/nonexistent"), [])


def test_concurrent_processes_never_share_a_port(tmp_path: Path) -> None:
    pool = a_free_range(600)
    children = [lease_in_child(tmp_path, pool, 25) for _ in range(4)]
    spans: list[int] = []
    try:
        for child in children:
            assert child.stdout is not None
            bases = json.loads(child.stdout.readline())
            spans += [port for base in bases for port in range(base - 2, base + 2)]
    finally:
        for child in children:
            child.communicate("\n", timeout=30)
    assert len(spans) == 4 * 25 * 4
    assert len(set(spans)) == len(spans), "a port was leased twice"
    assert all(pool[0] <= port <= pool[1] for port in spans)


def test_a_live_owners_lease_holds_and_a_dead_owners_lapses(tmp_path: Path) -> None:
    pool = a_free_range(4)
    owner = lease_in_child(tmp_path, pool, 1)
    assert owner.stdout is not None
    assert json.loads(owner.stdout.readline()) == [pool[0] + 2]
    with pytest.raises(PortsExhausted):
        PortLeases(tmp_path, [pool]).lease((-2, 0, 1))
    owner.communicate("\n", timeout=30)
    assert PortLeases(tmp_path, [pool]).lease((-2, 0, 1)) == pool[0] + 2


def test_a_bound_port_is_not_handed_out(tmp_path: Path) -> None:
    pool = a_free_range(2)
    with socket.create_server(("127.0.0.1", pool[0])):
        assert PortLeases(tmp_path, [pool]).lease() == pool[1]

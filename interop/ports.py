"""Ports for the servers the bench and the tests start, leased so that nothing else takes them.

    port = lease_port_block((-2, 0, 1))   # P-2, P and P+1 are this process's until it exits
    write_properties(conf, {"listenPort": port})

A port found by binding port 0 lies in the kernel's ephemeral range: between that choice and the
server's own bind, any outgoing connection on the machine (a JVM's, a client's) may be given the
same port, and the server fails with "Address already in use". The ports handed out here lie
outside that range (`/proc/sys/net/ipv4/ip_local_port_range`), where no outgoing connection is
ever placed, and each is leased under a lock in a directory of the temp dir, so pytest-xdist
workers, concurrent pytest sessions and the benchmarks never hand out the same port. A lease
ends when the process that took it exits (a server restarted on its port within a test keeps
it); a port is also probed and skipped if anything is bound to it.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import random
import socket
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

# Below this, ports that daemons and developers use by default (9876, 10911, 8080, ...).
POOL_FLOOR = 20000
DEFAULT_EPHEMERAL = (32768, 60999)
# A lease whose owner cannot be checked (pid reused after a crash) ends after this long.
LEASE_TTL_S = 6 * 3600


class PortsExhausted(RuntimeError):
    """No block of leasable ports is free: every one is leased or bound."""


def ephemeral_range(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections."""
    try:
        low, high = (int(part) for part in path.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL
    return low, high


def leasable_ranges(ephemeral: tuple[int, int] | None = None) -> list[tuple[int, int]]:
    """Inclusive port ranges outside the ephemeral range and above POOL_FLOOR."""
    low, high = ephemeral or ephemeral_range()
    candidates = [(POOL_FLOOR, low - 1), (max(POOL_FLOOR, high + 1), 65535)]
    return [(first, last) for first, last in candidates if first <= last]


def port_is_free(port: int) -> bool:
    # Java servers bind the wildcard address, so probe that rather than 127.0.0.1 alone.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (field 22 of /proc/PID/stat): with the pid it
    names one process, where a pid alone may have been reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


class PortLeases:
    """Leases of ports in `ranges`, one file per leased port in `directory`, under a lock."""

    def __init__(self, directory: Path, ranges: Sequence[tuple[int, int]]) -> None:
        if not ranges:
            raise PortsExhausted(
                f"no port above {POOL_FLOOR} lies outside the ephemeral range {ephemeral_range()}"
            )
        self.directory = directory
        self.ranges = list(ranges)
        self.pid = os.getpid()
        self._owner = f"{self.pid} {_start_time(self.pid)}"
        self._mine: list[int] = []
        # Processes start at different places of the pool, so they rarely scan each other's.
        self._cursor = random.Random(os.getpid() ^ time.time_ns()).randrange(self._pool_size())

    def lease(self, offsets: tuple[int, ...] = (0,)) -> int:
        """A port P such that P + each offset is leased to this process and free now."""
        first, last = min(offsets), max(offsets)
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._locked():
            leased = {int(name) for name in os.listdir(self.directory) if name.isdigit()}
            for start in self._starts(last - first + 1):
                span = range(start, start + last - first + 1)
                if any(port in leased and self._held(port) for port in span):
                    continue
                base = start - first
                if not all(port_is_free(base + offset) for offset in offsets):
                    continue
                for port in span:
                    (self.directory / str(port)).write_text(f"{self._owner} {time.time():.0f}\n")
                self._mine += span
                self._cursor = self._index(start) + len(span)
                return base
        raise PortsExhausted(f"no free block of ports {offsets} in {self.ranges}")

    def release_all(self) -> None:
        """End this process's leases (at exit: their files would lapse anyway, once read)."""
        if not self._mine:
            return
        with self._locked():
            for port in self._mine:
                path = self.directory / str(port)
                with contextlib.suppress(OSError):
                    if path.read_text().startswith(self._owner + " "):
                        path.unlink()
        self._mine.clear()

    def _pool_size(self) -> int:
        return sum(last - first + 1 for first, last in self.ranges)

    def _index(self, port: int) -> int:
        index = 0
        for first, last in self.ranges:
            if first <= port <= last:
                return index + port - first
            index += last - first + 1
        raise ValueError(port)

    def _starts(self, width: int) -> Iterator[int]:
        """First ports of every span of `width` inside one range, from the cursor round."""
        size = self._pool_size()
        for step in range(size):
            index = (self._cursor + step) % size
            for first, last in self.ranges:
                if index <= last - first:
                    if first + index + width - 1 <= last:
                        yield first + index
                    break
                index -= last - first + 1

    def _held(self, port: int) -> bool:
        """Whether the lease on `port` is still in force; a lapsed one is removed."""
        path = self.directory / str(port)
        try:
            pid, started, taken = path.read_text().split()
            in_force = _start_time(int(pid)) == started and time.time() - float(taken) < LEASE_TTL_S
        except (OSError, ValueError):
            in_force = False
        if not in_force:
            path.unlink(missing_ok=True)
        return in_force

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.directory / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


_leases: PortLeases | None = None


def default_leases() -> PortLeases:
    """This process's leases in the machine-wide directory (SIDEWINDER_PORT_LEASES moves it)."""
    global _leases
    if _leases is None or _leases.pid != os.getpid():  # a forked child leases as itself
        directory = os.environ.get("SIDEWINDER_PORT_LEASES") or os.path.join(
            tempfile.gettempdir(), "sidewinder-port-leases"
        )
        _leases = PortLeases(Path(directory), leasable_ranges())
        atexit.register(_leases.release_all)
    return _leases


def lease_port_block(offsets: tuple[int, ...] = (0,)) -> int:
    """A port P such that P + each offset is free and no other process will be handed it (a
    broker needs P-2, P and P+1)."""
    return default_leases().lease(offsets)

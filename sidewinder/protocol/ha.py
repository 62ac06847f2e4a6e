"""RocketMQ 4.x's HA wire, sans-IO: what a slave and its master say on the HA port.

The slave sends one thing: its CommitLog max offset, 8 bytes big-endian, at connect and after
each append (and every haSendHeartbeatInterval). The master sends frames of
[CommitLog offset 8][size 4][size bytes of CommitLog]; a frame of size 0 is a heartbeat naming
where the next data will start. A frame never crosses a CommitLog segment.

    reports = OffsetReports()
    reports.feed(chunk)              # any chunking
    reports.latest                   # the last complete offset, or None

    frames = TransferFrames(max_size=4 << 20)
    frames.feed(chunk)
    for offset, data in frames.take():   # HAProtocolError: close the connection
        ...
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

REPORT = struct.Struct(">q")
FRAME_HEADER = struct.Struct(">qi")
# The slave's read buffer in RocketMQ 4.9 (HAClient.READ_MAX_BUFFER_SIZE): no frame is larger.
MAX_FRAME_DATA = 4 << 20


class HAProtocolError(ValueError):
    """Bytes on the HA port that no RocketMQ peer sends; the connection must be closed."""


def encode_report(offset: int) -> bytes:
    """A slave's report: the CommitLog offset it has everything below."""
    return REPORT.pack(offset)


def encode_frame_header(offset: int, size: int) -> bytes:
    """The header of a master's frame of `size` CommitLog bytes from `offset`."""
    return FRAME_HEADER.pack(offset, size)


class OffsetReports:
    """The master's side: the slave's reports, of which only the newest matters (RocketMQ's
    ReadSocketService reads the last whole 8 bytes of what arrived)."""

    def __init__(self) -> None:
        self._pending = bytearray()
        self.latest: int | None = None

    def feed(self, data: bytes) -> int | None:
        """Take `data`; returns the newest complete offset in it (None when it held none)."""
        self._pending += data
        whole = len(self._pending) - len(self._pending) % REPORT.size
        if whole == 0:
            return None
        (offset,) = REPORT.unpack_from(self._pending, whole - REPORT.size)
        del self._pending[:whole]
        if offset < 0:
            raise HAProtocolError(f"slave reported a negative CommitLog offset {offset}")
        self.latest = offset
        return offset


class TransferFrames:
    """The slave's side: the master's frames, in order, from any chunking."""

    def __init__(self, max_size: int = MAX_FRAME_DATA) -> None:
        self.max_size = max_size
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def take(self) -> Iterator[tuple[int, bytes]]:
        """Every complete frame received so far, as (offset, data); data is b"" for a
        heartbeat."""
        buffer = self._buffer
        start = 0
        try:
            while len(buffer) - start >= FRAME_HEADER.size:
                offset, size = FRAME_HEADER.unpack_from(buffer, start)
                if offset < 0 or size < 0 or size > self.max_size:
                    raise HAProtocolError(
                        f"master sent a frame of offset {offset}, size {size} "
                        f"(the limit is {self.max_size} bytes)"
                    )
                end = start + FRAME_HEADER.size + size
                if end > len(buffer):
                    break
                yield offset, bytes(buffer[start + FRAME_HEADER.size : end])
                start = end
        finally:
            del buffer[:start]

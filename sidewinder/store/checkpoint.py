"""The `checkpoint` file: one page holding when each kind of store file was last flushed.

    physicMsgTimestamp @0 · logicsMsgTimestamp @8 · indexMsgTimestamp @16   (int64 ms, big-endian)

Abnormal recovery starts from the CommitLog segment whose first message is no newer than the
minimum of these. Writes go through pwrite + fdatasync (a blocking call: run it in an executor).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

PAGE = 4096
_LAYOUT = struct.Struct(">qqq")
# RocketMQ starts recovery a little before the recorded time, to cover clock skew between
# the moment a timestamp is stored and the flush that recorded it.
RECOVERY_MARGIN_MS = 3000


@dataclass
class StoreCheckpoint:
    path: Path
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0

    @classmethod
    def open(cls, path: Path) -> StoreCheckpoint:
        """Read an existing checkpoint, or start a zeroed one (RocketMQ does the same)."""
        if not path.exists():
            return cls(path)
        data = path.read_bytes()
        if len(data) < _LAYOUT.size:
            raise ValueError(f"{path} holds {len(data)} bytes; a checkpoint needs {_LAYOUT.size}")
        return cls(path, *_LAYOUT.unpack_from(data))

    def min_timestamp(self, *, index_safe: bool = False) -> int:
        """Where abnormal recovery may start (getMinTimestamp / getMinTimestampIndex)."""
        low = min(self.physic_msg_timestamp, self.logics_msg_timestamp)
        if index_safe:
            low = min(low, self.index_msg_timestamp)
        return max(low - RECOVERY_MARGIN_MS, 0)

    def flush(self) -> None:
        """Write all three stamps in place and make them durable. Blocking."""
        page = bytearray(PAGE)
        _LAYOUT.pack_into(
            page, 0, self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp
        )
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # One page, rewritten in place: it fits in one sector write, as RocketMQ's mmap does.
            os.pwrite(fd, page, 0)
            os.fdatasync(fd)
        finally:
            os.close(fd)

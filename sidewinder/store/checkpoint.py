"""The `checkpoint` file: one page holding when each kind of store file was last flushed.

    physicMsgTimestamp @0 · logicsMsgTimestamp @8 · indexMsgTimestamp @16   (int64 ms, big-endian)

Abnormal recovery starts from the CommitLog segment whose first message is no newer than the
minimum of these. Writes go through pwrite + fdatasync (a blocking call: run it in an executor).
The file is made whole (a full page, its block allocated) under a temporary name and renamed,
so a full disk leaves either no checkpoint or the last good one, never a short file; a write
that fails for space keeps the last one and says so (recovery only starts earlier for it).
"""

from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

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
        """The store's own, at its start: a crash's leftover `.creating` file removed, then the
        checkpoint read (`read`)."""
        path.with_name(path.name + ".creating").unlink(missing_ok=True)
        return cls.read(path)

    @classmethod
    def read(cls, path: Path) -> StoreCheckpoint:
        """Read an existing checkpoint, or start a zeroed one (RocketMQ does the same). Touches
        no file: a reader beside a running store (the Spark source, a test) must not remove
        the `.creating` file the store is about to rename into place."""
        if not path.exists():
            return cls(path)
        data = path.read_bytes()
        if len(data) < _LAYOUT.size:
            # Older versions could leave one empty on a full disk. Zeros make recovery walk
            # the whole CommitLog: slower, never wrong.
            log.warning("store.checkpoint_short", path=str(path), size=len(data))
            return cls(path)
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
        try:
            self._write(page)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            log.error("store.checkpoint_not_written", path=str(self.path), error=str(exc))

    def _write(self, page: bytes | bytearray) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            self._create(page)
            return
        try:
            if os.fstat(fd).st_size < PAGE:
                os.close(fd)
                fd = -1
                self._create(page)
                return
            # One page, rewritten in place: it fits in one sector write, as RocketMQ's mmap does.
            os.pwrite(fd, page, 0)
            os.fdatasync(fd)
        finally:
            if fd >= 0:
                os.close(fd)

    def _create(self, page: bytes | bytearray) -> None:
        creating = self.path.with_name(self.path.name + ".creating")
        fd = os.open(creating, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.posix_fallocate(fd, 0, PAGE)
            os.pwrite(fd, page, 0)
            os.fdatasync(fd)
        except BaseException:
            os.close(fd)
            creating.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.rename(creating, self.path)

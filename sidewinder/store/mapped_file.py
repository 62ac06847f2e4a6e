"""One fixed-size store file, memory-mapped read-write and named by its first global offset.

The file is created at its full size at once, so a segment's size on disk is always the
configured one. Its blocks are allocated (`posix_fallocate`) before it is mapped: a store write
into a page with no block behind it would be a SIGBUS on a full disk, killing the process,
where an allocation that fails is an error the store can answer ("disk full"). A file found on
disk (RocketMQ makes them sparse) is allocated before its first write, by `ensure_allocated`.
`flush()` is `os.fdatasync` on the file: it writes back pages dirtied through the map without
holding the GIL, so callers run it in an executor thread; the event loop never calls it.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import threading
from collections.abc import Callable
from pathlib import Path

_ZEROS = bytes(1 << 20)


class StoreFileError(OSError):
    """A store file that cannot be used as it is; the message names it."""


class DiskFullError(StoreFileError):
    """No room on the disk for a store file's blocks; the message names the file."""


_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def allocate(fd: int, offset: int, length: int, path: Path) -> None:
    """Give `length` bytes of the file from `offset` real blocks, or raise DiskFullError."""
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            raise DiskFullError(
                exc.errno, f"disk full: no room for {length} bytes of {path}", str(path)
            ) from None
        raise


class MappedFile:
    def __init__(self, path: Path, size: int, *, allocate_on_create: int | None = None) -> None:
        """Map `path`, creating it at `size` when missing with the first `allocate_on_create`
        bytes allocated (default: all; a writer that fills a file in order may allocate the
        rest as it goes, with `ensure_allocated`)."""
        self.path = path
        self.size = size
        if not path.name.isdigit():
            raise StoreFileError(f"{path}: a store file is named by its 20-digit offset")
        self.file_from_offset = int(path.name)
        # Blocks are allocated up to here; a file found on disk may be sparse (RocketMQ's are).
        self.allocated_to = 0
        if not path.exists():
            self.allocated_to = (
                size if allocate_on_create is None else min(allocate_on_create, size)
            )
            _create_sized(path, size, self.allocated_to)
        self._fd = os.open(path, os.O_RDWR)
        try:
            actual = os.fstat(self._fd).st_size
            if actual != size:
                raise StoreFileError(f"{path} is {actual} bytes; the configured size is {size}")
            self._map = mmap.mmap(self._fd, size, access=mmap.ACCESS_WRITE)
        except BaseException:
            os.close(self._fd)
            raise
        self.buffer = memoryview(self._map)
        # The map itself: slicing it gives bytes at once, with no view made per read or write.
        self.mapping = self._map
        self._mapped = threading.Lock()  # closing is once, whichever thread asks
        # Recovery reads no further: past it a sparse file has holes, and on tmpfs even a read
        # of a hole takes a block (a SIGBUS when the disk is full). See check_found_file.
        self.data_end = size
        # A TransientStorePool buffer whose bytes reach the file only when committed, while
        # the segment has one (readers see the committed part only); otherwise the map, though
        # the CommitLog appends with `write_at`.
        self.write_buffer = self.buffer
        self._give_back: Callable[[memoryview], None] | None = None
        self.wrote_position = 0
        self.committed_position = 0
        self.flushed_position = 0

    def ensure_allocated(self, end: int | None = None) -> None:
        """Allocate the blocks of `[0, end)` (default: the whole file) before writing there;
        DiskFullError when the disk has no room. A no-op once done. Blocking (briefly)."""
        end = self.size if end is None else min(end, self.size)
        start = self.allocated_to  # read once: a query thread may race the writer here
        if end > start:
            allocate(self._fd, start, end - start, self.path)
            self.allocated_to = end

    def check_found_file(self, *, allocate_whole: bool) -> None:
        """For a file found on disk, before anything reads it: one with every block is done.
        A sparse one (RocketMQ's, older ours) is allocated whole when `allocate_whole` and the
        disk has room; otherwise reads at start (recovery) stop at its first hole, where
        nothing was written and where, on tmpfs, even a read takes a block. Blocking."""
        if os.fstat(self._fd).st_blocks * 512 >= self.size:
            self.allocated_to = self.size
            return
        if allocate_whole:
            try:
                self.ensure_allocated()
                return
            except DiskFullError:
                pass
        with contextlib.suppress(OSError):
            self.data_end = os.lseek(self._fd, 0, os.SEEK_HOLE)

    def use_pool_buffer(self, buffer: memoryview, give_back: Callable[[memoryview], None]) -> None:
        """Write through `buffer` (a pooled one of this file's size) until the file is full."""
        self.write_buffer = buffer
        self._give_back = give_back

    @property
    def pooled(self) -> bool:
        return self._give_back is not None

    @property
    def read_position(self) -> int:
        """How far readers (and flushes) may go: what reached the file."""
        return self.committed_position if self.pooled else self.wrote_position

    def write_at(self, data: memoryview, position: int) -> None:
        """Write `data` into the file at `position` with pwrite (the GIL let go meanwhile).

        The CommitLog appends this way rather than by storing through the map: each writeback
        write-protects the pages stored into through a shared map again, and on ext4 the
        fdatasync after such a store grows with how much of the file was written that way
        (0.17 ms on a fresh file, 0.6-0.8 ms after 300 MiB, here); after a pwrite it stays
        at 0.12 ms. Readers still read through the map, which shares the page cache."""
        written = 0
        while written < len(data):
            written += os.pwrite(self._fd, data[written:], position + written)

    def commit(self) -> int:
        """Copy appended bytes from the pool buffer into the file (a pwrite, GIL released);
        the buffer goes back to the pool once the file is full. Blocking."""
        if not self.pooled:
            return self.wrote_position
        target = self.wrote_position
        if target > self.committed_position:
            start = self.committed_position
            self.write_at(self.write_buffer[start:target], start)
            self.committed_position = target
        if self.committed_position == self.size:
            self._return_buffer()
        return self.committed_position

    def _return_buffer(self) -> None:
        if self._give_back is not None:
            give_back, self._give_back = self._give_back, None
            buffer, self.write_buffer = self.write_buffer, self.buffer
            give_back(buffer)

    @staticmethod
    def name_for(offset: int) -> str:
        return f"{offset:020d}"

    @property
    def remaining(self) -> int:
        return self.size - self.wrote_position

    @property
    def is_full(self) -> bool:
        return self.wrote_position == self.size

    @property
    def end_offset(self) -> int:
        """Global offset just past what readers may see."""
        return self.file_from_offset + self.read_position

    @property
    def fd(self) -> int:
        """The open file's descriptor (-1 once closed)."""
        return self._fd

    def flush(self) -> int:
        """Make everything written so far durable; returns the flushed position. Blocking."""
        target = self.read_position
        if target > self.flushed_position:
            os.fdatasync(self._fd)
            self.flushed_position = target
        return self.flushed_position

    def sync(self) -> None:
        """fdatasync whatever was written through the map (files not written by appending)."""
        os.fdatasync(self._fd)

    def close(self) -> None:
        with self._mapped:
            self._close()

    def _close(self) -> None:
        if self._fd < 0:
            return
        self._return_buffer()
        self.buffer.release()
        # A reader still holding a view into this map unmaps it when that view goes.
        with contextlib.suppress(BufferError):
            self._map.close()
        os.close(self._fd)
        self._fd = -1

    def destroy(self) -> None:
        """Close and delete the file (dirty-tail truncation). Blocking."""
        self.close()
        self.path.unlink(missing_ok=True)

    def warm(self, *, sync_every_bytes: int = 0) -> None:
        """Write the whole file once (zeros, through pwrite) so its blocks are allocated and
        its pages cached before appends fault on them (warmMapedFileEnable). Blocking."""
        chunk = _ZEROS
        written_since_sync = 0
        for at in range(0, self.size, len(chunk)):
            os.pwrite(self._fd, chunk[: self.size - at], at)
            written_since_sync += len(chunk)
            if sync_every_bytes and written_since_sync >= sync_every_bytes:
                os.fdatasync(self._fd)
                written_since_sync = 0

    def last_modified(self) -> float:
        """The file's mtime in seconds (cleanup ages segments by it, as RocketMQ does)."""
        return os.stat(self._fd).st_mtime if self._fd >= 0 else os.stat(self.path).st_mtime

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}/{self.size})"


def _create_sized(path: Path, size: int, allocated: int) -> None:
    """Create a store file at its full size, its blocks allocated, atomically: a crash between
    creating and sizing it must not leave a short file under the real name (loaders skip the
    temporary name), and a file the disk has no room for is not left at all."""
    creating = path.with_name(path.name + ".creating")
    fd = os.open(creating, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
        if allocated:
            allocate(fd, 0, allocated, path)
    except BaseException:
        os.close(fd)
        creating.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.rename(creating, path)

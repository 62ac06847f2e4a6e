"""The segments of one log (the CommitLog, or one ConsumeQueue) as a single offset space."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path

import structlog

from sidewinder.store.mapped_file import DiskFullError, MappedFile, StoreFileError
from sidewinder.store.transient_pool import TransientStorePool

log = structlog.get_logger(__name__)

_ZEROS = bytes(1 << 20)
_PAGE = 4096


def zero_tail(buffer: memoryview, start: int, quiet_window: int | None = None) -> None:
    """Zero `buffer[start:]` (a whole file's map) where it is not already zero.

    After a torn tail is cut, the stale records beyond the cut must not survive: an append of a
    different size would leave them to be read back as valid by the next recovery. Stale bytes
    are one contiguous run of records, none longer than the largest message, so once
    `quiet_window` bytes in a row are zero nothing further can be stale: the scan stops there
    instead of faulting in the rest of a large sparse segment.

    Only pages that hold bytes are written: a page reading as zeros may be a hole of a sparse
    file, and writing it would need a block the disk may not have (a SIGBUS when it is full).
    """
    quiet = 0
    chunk_start = start
    while chunk_start < len(buffer):
        # Chunks end on page boundaries, so each page is judged whole.
        chunk_end = min((chunk_start // _PAGE + len(_ZEROS) // _PAGE) * _PAGE, len(buffer))
        chunk = buffer[chunk_start:chunk_end]
        if chunk != _ZEROS[: len(chunk)]:
            _zero_written_pages(buffer, chunk_start, chunk_end)
            quiet = 0
        else:
            quiet += len(chunk)
            if quiet_window is not None and quiet > quiet_window:
                return
        chunk_start = chunk_end


def _zero_written_pages(buffer: memoryview, start: int, end: int) -> None:
    at = start
    while at < end:
        page_end = min((at // _PAGE + 1) * _PAGE, end)
        page = buffer[at:page_end]
        if page != _ZEROS[: len(page)]:
            page[:] = _ZEROS[: len(page)]
        at = page_end


class MappedFileQueue:
    def __init__(
        self,
        directory: Path,
        file_size: int,
        pool: TransientStorePool | None = None,
        *,
        allocation_step: int | None = None,
    ) -> None:
        """`allocation_step`: None allocates each new file whole (the CommitLog); a step
        allocates as appends go, that much ahead (ConsumeQueues: RocketMQ's are sparse, and
        a store holds thousands of them)."""
        self.directory = directory
        self.file_size = file_size
        self.allocation_step = allocation_step
        self.files: list[MappedFile] = []
        self.pool = pool
        # Segments written through a pool buffer and not yet wholly committed, oldest first.
        self._pooled: list[MappedFile] = []
        self._pooled_lock = threading.Lock()  # appended on the loop, pruned by the committer
        # The next segment, made (and warmed) in the background while this one fills.
        self._allocator: Executor | None = None
        self._warm_sync_every = -1  # -1: no warming; 0: warm without syncing
        self._next: tuple[int, Future[MappedFile]] | None = None
        # Asked before each new segment is made (with its size); raises DiskFullError to
        # refuse it. The store's disk check: a new segment must not fill the disk.
        self.before_create: Callable[[int], None] | None = None

    def preallocate(self, executor: Executor, *, warm: bool, sync_every_bytes: int = 0) -> None:
        """Create each next segment ahead of need on `executor` (AllocateMappedFileService)."""
        self._allocator = executor
        self._warm_sync_every = sync_every_bytes if warm else -1

    def prepare_next(self) -> None:
        """Start making the segment appends will need next (at start, after recovery)."""
        if self._allocator is None or self._next is not None:
            return
        last = self.last_file
        if last is None:
            offset = 0
        elif last.is_full:
            offset = last.file_from_offset + self.file_size
        else:
            return  # writable_file prepares the one after it when it fills
        self._next = (offset, self._allocator.submit(self._make, offset))

    def wait_prepared(self) -> None:
        """Block until the segment being prepared exists (benchmarks start from steady state)."""
        if self._next is not None:
            self._next[1].result()

    def _make(self, offset: int) -> MappedFile:
        made = self._make_now(offset)
        if self._warm_sync_every >= 0:
            made.warm(sync_every_bytes=self._warm_sync_every)
        return made

    def _take_prepared(self, offset: int) -> MappedFile | None:
        if self._next is None:
            return None
        prepared_offset, future = self._next
        self._next = None
        try:
            # Normally long done: a segment takes far longer to fill than to make.
            prepared = future.result()
        except DiskFullError:
            return None  # the caller tries once more, and says "disk full" if that fails too
        if prepared_offset != offset:
            prepared.destroy()  # made for an offset no longer wanted
            return None
        return prepared

    def load(self) -> None:
        """Map the existing segments in offset order; they must be contiguous and full-size.

        Positions stay 0 until recovery sets them from what the files hold.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        for leftover in self.directory.glob("*.creating"):
            # A file a crash interrupted being made: never named, never written.
            leftover.unlink(missing_ok=True)
        names = sorted(
            (p for p in self.directory.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
        )
        if names and names[-1].stat().st_size == 0:
            # RocketMQ creates a file, then sizes it: a crash between leaves it empty, holding
            # nothing (RocketMQ itself then refuses to start). Recovery makes it again.
            log.warning("store.empty_file_removed", path=str(names[-1]))
            names.pop().unlink()
        expected: int | None = None
        for path in names:
            offset = int(path.name)
            if expected is not None and offset != expected:
                raise StoreFileError(
                    f"{path}: starts at {offset}, the previous segment ends at {expected}"
                )
            found = MappedFile(path, self.file_size)
            found.check_found_file(allocate_whole=self.allocation_step is None)
            self.files.append(found)
            expected = offset + self.file_size

    @property
    def last_file(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def writable_file(self, start_offset: int = 0) -> MappedFile:
        """The segment appends go to, creating the first or the next one as needed."""
        last = self.last_file
        if last is not None and not last.is_full:
            step = self.allocation_step
            if step is None:
                if last.allocated_to < last.size:
                    last.ensure_allocated()  # found sparse on disk; DiskFullError if no room
            elif last.allocated_to < min(last.wrote_position + step // 2, last.size):
                last.ensure_allocated(last.wrote_position + step)
            return last
        offset = start_offset if last is None else last.file_from_offset + self.file_size
        if offset % self.file_size:
            raise StoreFileError(f"segment offset {offset} is not a multiple of {self.file_size}")
        self.directory.mkdir(parents=True, exist_ok=True)
        created = self._take_prepared(offset) or self._make_now(offset)
        if self.pool is not None:
            buffer = self.pool.borrow()
            if buffer is not None:
                created.use_pool_buffer(buffer, self.pool.give_back)
                with self._pooled_lock:
                    self._pooled = [*self._pooled, created]
        if self._allocator is not None:
            following = offset + self.file_size
            self._next = (following, self._allocator.submit(self._make, following))
        self.files.append(created)
        return created

    def _make_now(self, offset: int) -> MappedFile:
        path = self.directory / MappedFile.name_for(offset)
        if self.before_create is not None and not path.exists():
            self.before_create(self.file_size)
        return MappedFile(path, self.file_size, allocate_on_create=self.allocation_step)

    def find(self, offset: int) -> MappedFile | None:
        """The segment holding global `offset`, if any (segments are contiguous)."""
        files = self.files  # one snapshot: cleanup replaces the list, never edits it
        if not files or offset < files[0].file_from_offset:
            return None
        i = (offset - files[0].file_from_offset) // self.file_size
        return files[i] if i < len(files) else None

    def drop_head(self, count: int) -> list[MappedFile]:
        """Take the first `count` segments out of the queue (cleanup); the caller destroys them.

        The list is replaced, not edited, so a reader on another thread walking or searching
        the old one sees a consistent set; the last segment is never dropped.
        """
        count = min(count, len(self.files) - 1)
        if count <= 0:
            return []
        dropped, self.files = self.files[:count], self.files[count:]
        return dropped

    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        """End of what readers may see: a contiguous prefix, so a segment still waiting for
        its pooled bytes to be committed hides the segments after it."""
        for f in self._pooled:
            if f.pooled:
                return f.end_offset
        last = self.last_file
        return last.end_offset if last else 0

    @property
    def flushed_offset(self) -> int:
        """End of the durable prefix: the first segment not wholly flushed ends it.

        (Appends race with a flush walking the segments: a later segment may be synced while an
        earlier one's tail, written meanwhile, is not. Only the contiguous prefix is durable.)
        """
        for f in self.files:
            if f.flushed_position < f.size:
                return f.file_from_offset + f.flushed_position
        return self.max_offset

    def set_positions(self, end_offset: int, *, quiet_window: int | None = None) -> None:
        """After recovery: everything before `end_offset` is written and durable; drop the rest.

        Segments starting past it are deleted (as RocketMQ's truncateDirtyFiles does); the one
        holding it is cut back. Bytes after it stay on disk until the next appends overwrite
        them.
        """
        for f in list(self.files):
            if f.file_from_offset > end_offset:
                f.destroy()
                self.files = [kept for kept in self.files if kept is not f]
                continue
            position = min(end_offset - f.file_from_offset, self.file_size)
            f.wrote_position = f.committed_position = f.flushed_position = position
            if position < f.data_end:
                zero_tail(f.buffer[: f.data_end], position, quiet_window)

    def flush(self) -> int:
        """fdatasync every segment with unflushed bytes; returns the flushed offset. Blocking."""
        for f in self.files:
            if f.read_position > f.flushed_position:
                f.flush()
        return self.flushed_offset

    def sync_plan(self) -> tuple[list[int], Callable[[], int]]:
        """`flush` in two halves, for a sync on another thread: the descriptors of the
        segments with unflushed bytes, and what marks those bytes flushed once they are synced
        (returning the flushed offset). Each half runs where appends do not (the loop)."""
        targets = [(f, f.read_position) for f in self.files if f.read_position > f.flushed_position]

        def mark_flushed() -> int:
            for f, position in targets:
                f.flushed_position = max(f.flushed_position, position)
            return self.flushed_offset

        return [f.fd for f, _ in targets], mark_flushed

    def commit(self) -> int:
        """Copy pooled appends into their files; returns the readable end. Blocking."""
        for f in self._pooled:
            f.commit()
        with self._pooled_lock:
            self._pooled = [f for f in self._pooled if f.pooled]
        return self.max_offset

    @property
    def uncommitted_bytes(self) -> int:
        return sum(f.wrote_position - f.committed_position for f in self._pooled if f.pooled)

    def sync_all(self) -> None:
        """fdatasync every segment, whatever its positions say (after recovery). Blocking."""
        for f in self.files:
            f.sync()

    def close(self) -> None:
        """Close every segment; a prepared, never used one is deleted. Blocking."""
        if self._next is not None:
            _, future = self._next
            self._next = None
            with contextlib.suppress(OSError):  # failed to be made: nothing to remove
                future.result().destroy()
        for f in self.files:
            f.close()
        self.files = []

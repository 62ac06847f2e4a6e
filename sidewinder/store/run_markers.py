"""The `lock` and `abort` files at the store root.

`lock`: held with a POSIX record lock for as long as a store is open, so a second process (ours,
or a RocketMQ broker, whose FileChannel.tryLock takes the same kind of lock) cannot open the same
directory. `abort`: present while a store runs; finding it at startup means the last run did not
shut down cleanly, and recovery must be the abnormal kind.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class StoreLockedError(RuntimeError):
    """Another process has this store open."""


class RunMarkers:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.lock_path = root / "lock"
        self.abort_path = root / "abort"
        self._lock_fd = -1

    def acquire(self) -> bool:
        """Take the lock (or fail at once); returns whether the last run crashed."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # Byte 0 only, the range RocketMQ's tryLock(0, 1, false) takes.
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError:
            os.close(fd)
            raise StoreLockedError(
                f"{self.root} is in use by another process (it holds {self.lock_path}); "
                "stop that broker first"
            ) from None
        self._lock_fd = fd
        crashed = self.abort_path.exists()
        if not crashed:
            self.abort_path.touch()
            _fsync_dir(self.root)
        return crashed

    def mark_clean_shutdown(self) -> None:
        """The last step of a clean shutdown, after every flush: no abort file next time."""
        self.abort_path.unlink(missing_ok=True)
        _fsync_dir(self.root)

    def release(self) -> None:
        if self._lock_fd >= 0:
            fcntl.lockf(self._lock_fd, fcntl.LOCK_UN, 1, 0)
            os.close(self._lock_fd)
            self._lock_fd = -1


def _fsync_dir(path: Path) -> None:
    # The abort file's presence is the crash signal: its creation and removal must be durable.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

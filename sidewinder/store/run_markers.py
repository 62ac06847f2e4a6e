"""The `lock` and `abort` files at the store root, and the CommitLog directory's lock.

`lock`: held with a POSIX record lock for as long as a store is open, so a second process (ours,
or a RocketMQ broker, whose FileChannel.tryLock takes the same kind of lock) cannot open the same
directory. `abort`: present while a store runs; finding it at startup means the last run did not
shut down cleanly, and recovery must be the abnormal kind.

The CommitLog may live outside the root (`storePathCommitLog`, which RocketMQ defaults to
~/store/commitlog whatever `storePathRootDir` says), so two stores with their own roots can
name one CommitLog directory. `CommitLogDirLock` holds an flock on the directory itself (no
file is added there: RocketMQ's loader refuses any file in it that is not a segment) and notes
its holder in an extended attribute, so the second store can say who has it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

OWNER_XATTR = "user.sidewinder.owner"


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
        self.lock()
        return self.mark_running()

    def lock(self) -> None:
        """Take the root's lock, or fail at once naming it."""
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

    def mark_running(self) -> bool:
        """Leave the abort file for as long as the store runs; whether the last run crashed."""
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


class CommitLogDirLock:
    def __init__(self, directory: Path, owner: str) -> None:
        self.directory = directory
        self.owner = owner  # who we are, as the next store to try will be told
        self._fd = -1

    def acquire(self) -> None:
        """Lock the directory (creating it) or fail at once, naming the holder."""
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            # flock, not lockf: it binds to this open file, so a second store in the same
            # process is refused too.
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = describe_holder(self.directory, fd)
            os.close(fd)
            raise StoreLockedError(
                f"the CommitLog directory {self.directory} is in use by {holder}. Two brokers "
                "must not share one CommitLog: give this one its own storePathCommitLog "
                "(RocketMQ puts the CommitLog at ~/store/commitlog unless storePathCommitLog "
                "is set, whatever storePathRootDir says)"
            ) from None
        except OSError as exc:
            # A filesystem that cannot lock a directory (NFS emulates flock with record locks,
            # which want a file open for writing): go on without this guard, and say so.
            os.close(fd)
            log.warning("store.commitlog_not_locked", path=str(self.directory), reason=exc.strerror)
            return
        self._fd = fd
        note = f"{self.owner}, pid {os.getpid()}".encode()
        with contextlib.suppress(OSError):  # a filesystem without user xattrs: pid only
            os.setxattr(fd, OWNER_XATTR, note)

    def release(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):  # the note must not outlive the lock
                os.removexattr(self._fd, OWNER_XATTR)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


def describe_holder(directory: Path, fd: int) -> str:
    """Who holds the lock on `directory`: the holder's note, else the pid in /proc/locks."""
    with contextlib.suppress(OSError):
        return os.getxattr(fd, OWNER_XATTR).decode("utf-8", "replace")
    st = os.fstat(fd)
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    with contextlib.suppress(OSError):
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == device:
                return f"another store, pid {fields[4]}"
    return "another store"

"""A real small filesystem for full-disk tests: a tmpfs mounted in the test's temp dir.

The test machines run as root (see the README), so `mount` works; a machine where it does not
fails these tests with the reason instead of skipping them.

    with small_disk(tmp_path / "disk", mib=48) as disk:
        ballast = fill(disk, leave_bytes=0)   # take what is left, to be freed later
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_disk(path: Path, *, mib: int) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a {mib} MiB tmpfs at {path} (root needed): {mounted.stderr}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def free_bytes(path: Path) -> int:
    fs = os.statvfs(path)
    return fs.f_bavail * fs.f_frsize


def fill(disk: Path, *, leave_bytes: int = 0, name: str = "ballast") -> Path:
    """Take all but `leave_bytes` of the disk's free space with a file (blocks allocated)."""
    ballast = disk / name
    fd = os.open(ballast, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        want = free_bytes(disk) - leave_bytes
        step = 1 << 20
        size = os.fstat(fd).st_size
        while want > 0:
            chunk = min(step, want)
            try:
                os.posix_fallocate(fd, size, chunk)
            except OSError:
                if chunk <= 4096:
                    break
                step = max(step // 2, 4096)
                continue
            size += chunk
            want -= chunk
    finally:
        os.close(fd)
    return ballast

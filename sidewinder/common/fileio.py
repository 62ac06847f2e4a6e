"""Metadata files (config/*.json, kv stores) written atomically, with the previous one as .bak.

    write_atomic(path, text)        # path.tmp -> fsync -> old file to path.bak -> rename
    read_with_backup(path, parse)   # path, or path.bak when path is missing or unparsable

A crash at any point leaves either the old or the new content under `path` (or under
`path.bak` while the rename is in flight), never a torn file: the same promise RocketMQ's
ConfigManager makes with its .tmp and .bak files. Blocking: async callers use an executor.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class MetadataFileError(ValueError):
    """Neither the file nor its backup could be read; the message names both."""


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, content: str | bytes) -> None:
    data = content.encode() if isinstance(content, str) else content
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        # A full disk (ENOSPC) stops here: the previous file stays, the partial one goes.
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    if path.exists():
        # Keep the last good version: a hard link is atomic and leaves `path` in place.
        bak = path.with_name(path.name + ".bak")
        with contextlib.suppress(FileNotFoundError):
            bak.unlink()
        os.link(path, bak)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def read_with_backup(path: Path, parse: Callable[[str], T]) -> T | None:
    """Parse `path`, falling back to `path.bak`; None when neither exists."""
    bak = path.with_name(path.name + ".bak")
    problems = []
    for candidate in (path, bak):
        try:
            text = candidate.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        try:
            return parse(text)
        except ValueError as exc:
            problems.append(f"{candidate}: {exc}")
    if problems:
        raise MetadataFileError("cannot read metadata: " + "; ".join(problems))
    return None

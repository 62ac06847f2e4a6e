"""The broker's metadata files under {storePathRootDir}/config, in RocketMQ's JSON shapes.

Each table is loaded at start (falling back to its .bak) and written atomically when it
changes (topics, subscription groups) or on a timer (consumer offsets). A table's `writer()`
encodes it on the event loop's thread, where the table changes, and returns the blocking write
for an executor: a thread that read a live table while the loop changed it could fail ("dictionary
changed size during iteration") or write half of a change.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import structlog

from sidewinder.common.fileio import read_with_backup, write_atomic
from sidewinder.protocol import body

log = structlog.get_logger(__name__)


class JsonTable:
    """A metadata file: load once, persist whole."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load_json(self) -> Any:
        return read_with_backup(self.path, body.loads)

    def persist_json(self, value: Any) -> bool:
        """Write the table now (blocking); see `write`."""
        return self.write(body.dumps(value))

    def writer(self, value: Any) -> Callable[[], bool]:
        """`value` encoded now, and the blocking write of it (see `write`) to run later."""
        return partial(self.write, body.dumps(value))

    def write(self, data: str) -> bool:
        """Write the encoded table; False (logged) when the disk refused, the previous file
        kept, as RocketMQ's ConfigManager.persist logs and goes on. The next change or timer
        retries."""
        try:
            write_atomic(self.path, data)
        except OSError as exc:
            log.error("broker.metadata_not_saved", path=str(self.path), error=str(exc))
            return False
        return True

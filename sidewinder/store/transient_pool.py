"""TransientStorePool: segment-sized anonymous buffers that CommitLog appends are written into.

With `transientStorePoolEnable` (ASYNC_FLUSH only, as in RocketMQ), appends land in one of
`transientStorePoolSize` buffers instead of the file's map; a commit every
`commitIntervalCommitLog` ms copies them into the file with pwrite (the GIL released, the
kernel allocating page-cache pages in bulk), and only then can readers and the dispatcher see
them. When the pool is empty a new segment is written through its map as usual.
"""

from __future__ import annotations

import mmap
import threading


class TransientStorePool:
    def __init__(self, buffers: int, buffer_size: int) -> None:
        self.buffer_size = buffer_size
        self._lock = threading.Lock()
        # Anonymous maps: memory is taken page by page as appends touch it.
        self._maps = [mmap.mmap(-1, buffer_size) for _ in range(buffers)]
        self._free = [memoryview(m) for m in self._maps]

    def borrow(self) -> memoryview | None:
        with self._lock:
            return self._free.pop() if self._free else None

    def give_back(self, buffer: memoryview) -> None:
        with self._lock:
            self._free.append(buffer)

    @property
    def available(self) -> int:
        """remainTransientStoreBufferNumbs in the runtime info."""
        with self._lock:
            return len(self._free)

    def close(self) -> None:
        with self._lock:
            for view in self._free:
                view.release()
            self._free.clear()
            for m in self._maps:
                m.close()

"""The store's dispatch thread: one worker that owns the ConsumeQueue and index files, every job
it runs holding their lock.

    thread = DispatchThread()
    await loop.run_in_executor(thread, reput.dispatch_until, limit)   # under the lock
    with thread.try_lock() as held:                                   # on the loop
        if held:
            reput.dispatch_inline(limit)

The lock lets the event loop dispatch a few records itself (when it can take the lock at once
and the records need no file made): cheaper than handing them to the thread and back, which for
an unloaded SYNC_FLUSH send costs more CPU than the dispatch does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class DispatchThread(Executor):
    def __init__(self) -> None:
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="store-dispatch")
        self._lock = threading.Lock()

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        def locked() -> T:
            with self._lock:
                return fn(*args, **kwargs)

        return self._worker.submit(locked)

    @contextmanager
    def try_lock(self) -> Iterator[bool]:
        """The lock if no job holds it now (never waits): True while held."""
        held = self._lock.acquire(blocking=False)
        try:
            yield held
        finally:
            if held:
                self._lock.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._worker.shutdown(wait, cancel_futures=cancel_futures)

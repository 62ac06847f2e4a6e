"""Running a daemon until SIGTERM / SIGINT (the shared tail of mqnamesrv, mqbroker and
sidewinder-dev), and stopping a service's background tasks.

    await cancel_and_wait(self._tasks)      # a service's stop(): its loops end, then it closes
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import structlog

log = structlog.get_logger(__name__)


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel `tasks` (None: never started) and return once each has ended. One that had
    already died of an error is logged, not raised: a stop goes on to close what it must."""
    started = [task for task in tasks if task is not None]
    for task in started:
        task.cancel()
    for task, outcome in zip(
        started, await asyncio.gather(*started, return_exceptions=True), strict=True
    ):
        if isinstance(outcome, Exception):
            log.error("task.died", task=task.get_name(), error=repr(outcome))


async def serve_until_signalled(
    start: Callable[[], Awaitable[object]],
    stop: Callable[[], Awaitable[None]],
    banner: Callable[[], str],
) -> None:
    """Start, print the banner (tests and users wait for it), run until a signal, stop."""
    await start()
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    print(banner(), flush=True)
    await stopping.wait()
    await stop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        # Stopped cleanly: a second signal (a supervisor repeating itself) must not turn the
        # exit into a death by signal while the loop and the interpreter wind down.
        loop.remove_signal_handler(signum)
        signal.signal(signum, signal.SIG_IGN)

"""Running a daemon until SIGTERM / SIGINT: the shared tail of mqnamesrv, mqbroker and
sidewinder-dev."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable


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

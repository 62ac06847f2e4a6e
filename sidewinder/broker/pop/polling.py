"""Held pops (RocketMQ 5's PopLongPollingService): a pop that finds nothing waits until a
message arrives in one of the topics it reads (the topic or the group's retry topic) or its
poll time runs out, then is served again."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable


class Hold(enum.Enum):
    HELD = 0
    FULL = 1  # POLLING_FULL
    TIMEOUT = 2  # POLLING_TIMEOUT


class PopHolds:
    def __init__(self, max_total: int, max_per_topic: int) -> None:
        self.max_total = max_total
        self.max_per_topic = max_per_topic
        self._held: dict[str, set[asyncio.Future[None]]] = {}
        self.count = 0

    def hold(
        self, topics: Iterable[str], expires_ms: int, now_ms: int
    ) -> tuple[Hold, asyncio.Future[None] | None]:
        """Wait for an arrival in `topics` until `expires_ms`; the future is done then."""
        if self.count >= self.max_total:
            return Hold.FULL, None
        if expires_ms < now_ms:
            return Hold.TIMEOUT, None
        keys = list(topics)
        if any(len(self._held.get(k, ())) > self.max_per_topic for k in keys):
            return Hold.FULL, None
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        for key in keys:
            self._held.setdefault(key, set()).add(woken)
        self.count += 1
        timer = loop.call_later((expires_ms - now_ms) / 1000, self._wake, woken)

        def done(_: asyncio.Future[None]) -> None:
            timer.cancel()
            self.count -= 1
            for key in keys:
                held = self._held.get(key)
                if held is not None:
                    held.discard(woken)
                    if not held:
                        del self._held[key]

        woken.add_done_callback(done)
        return Hold.HELD, woken

    @staticmethod
    def _wake(woken: asyncio.Future[None]) -> None:
        if not woken.done():
            woken.set_result(None)

    def arrived(self, topic: str, queue_id: int, max_offset: int) -> None:
        """The store dispatched messages of `topic`: serve again every pop reading it."""
        for woken in list(self._held.get(topic, ())):
            self._wake(woken)

    def release_all(self) -> None:
        for held in list(self._held.values()):
            for woken in list(held):
                self._wake(woken)

"""Held pops and notifications (RocketMQ 5's PopLongPollingService): a request that finds
nothing waits until a message arrives in one of the topics it reads (the topic or the group's
retry topics) or its poll time runs out, then is served again. Counted by polling key
(topic@group@queueId) for POLLING_INFO and the per-key limit (popPollingSize)."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable


class Hold(enum.Enum):
    HELD = 0
    FULL = 1  # POLLING_FULL
    TIMEOUT = 2  # POLLING_TIMEOUT


class PopHolds:
    def __init__(self, max_total: int, max_per_key: int) -> None:
        self.max_total = max_total
        self.max_per_key = max_per_key
        self._by_topic: dict[str, set[asyncio.Future[None]]] = {}
        self._per_key: dict[str, int] = {}
        self.count = 0

    def polling(self, key: str) -> int:
        """How many requests wait under a polling key."""
        return self._per_key.get(key, 0)

    def hold(
        self, key: str, topics: Iterable[str], expires_ms: int, now_ms: int
    ) -> tuple[Hold, asyncio.Future[None] | None]:
        """Wait for an arrival in `topics` until `expires_ms`; the future is done then."""
        if self.count >= self.max_total:
            return Hold.FULL, None
        if expires_ms < now_ms:
            return Hold.TIMEOUT, None
        if self._per_key.get(key, 0) > self.max_per_key:
            return Hold.FULL, None
        watched = list(topics)
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        for topic in watched:
            self._by_topic.setdefault(topic, set()).add(woken)
        self.count += 1
        self._per_key[key] = self._per_key.get(key, 0) + 1
        timer = loop.call_later((expires_ms - now_ms) / 1000, self._wake, woken)

        def done(_: asyncio.Future[None]) -> None:
            timer.cancel()
            self.count -= 1
            left = self._per_key.pop(key, 1) - 1
            if left > 0:
                self._per_key[key] = left
            for topic in watched:
                held = self._by_topic.get(topic)
                if held is not None:
                    held.discard(woken)
                    if not held:
                        del self._by_topic[topic]

        woken.add_done_callback(done)
        return Hold.HELD, woken

    @staticmethod
    def _wake(woken: asyncio.Future[None]) -> None:
        if not woken.done():
            woken.set_result(None)

    def arrived(self, topic: str, queue_id: int, max_offset: int) -> None:
        """The store dispatched messages of `topic`: serve again every request reading it."""
        for woken in list(self._by_topic.get(topic, ())):
            self._wake(woken)

    def release_all(self) -> None:
        for held in list(self._by_topic.values()):
            for woken in list(held):
                self._wake(woken)

"""Auto-renew of a push consumer's receipt handles (RocketMQ's ReceiptHandleProcessor).

A push consumer receives with `auto_renew` and no invisible time: its messages are invisible
for RENEW_SLICE_MS, and while the client has not acked them the front extends that, RENEW_AHEAD_MS
before it runs out, up to RENEW_MAX_MS in all. Each extension makes a new handle; the client
keeps acking with the one it got, which the front maps to the newest. When the client goes
away, its messages are made visible again at once (RELEASE_MS), not when their time runs out.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from sidewinder.protocol.pop import ExtraInfo

log = structlog.get_logger(__name__)

RENEW_SLICE_MS = 60_000  # renewSliceTimeMillis
RENEW_AHEAD_MS = 10_000  # renewAheadTimeMillis
RENEW_MAX_MS = 3 * 3600 * 1000  # renewMaxTimeMillis
RELEASE_MS = 1_000  # how soon a gone client's messages come back (the broker takes > 0)


@dataclass
class Tracked:
    client_id: str
    group: str
    topic: str
    handle: str  # the newest
    expires_ms: int  # when the newest handle's invisible time runs out
    received_ms: int = field(default_factory=lambda: int(time.time() * 1000))


# (group, topic, handle, invisible ms) -> the new handle, or raises
Change = Callable[[str, str, str, int], Awaitable[str]]


def _expiry(handle: str) -> int:
    info = ExtraInfo.decode(handle)
    return info.pop_time + info.invisible_time


class ReceiptRenewals:
    def __init__(
        self,
        change: Change,
        slice_ms: int = RENEW_SLICE_MS,
        ahead_ms: int = RENEW_AHEAD_MS,
        max_ms: int = RENEW_MAX_MS,
    ) -> None:
        self.change = change
        self.slice_ms = slice_ms  # also how long a push consumer's received messages hide
        self.ahead_ms = ahead_ms
        self.max_ms = max_ms
        self.tracked: dict[str, Tracked] = {}  # keyed by the handle the client was given

    def track(self, client_id: str, group: str, topic: str, handle: str) -> None:
        self.tracked[handle] = Tracked(client_id, group, topic, handle, _expiry(handle))

    def newest(self, handle: str) -> str:
        """The handle to settle a message with, given the one its client was given."""
        tracked = self.tracked.get(handle)
        return handle if tracked is None else tracked.handle

    def settled(self, handle: str) -> None:
        """Acked, nacked or dead-lettered by its client: no more renewals."""
        self.tracked.pop(handle, None)

    async def renew_due(self, now_ms: int) -> None:
        for given, tracked in list(self.tracked.items()):
            if tracked.expires_ms - now_ms > self.ahead_ms:
                continue
            if now_ms - tracked.received_ms >= self.max_ms:
                self.tracked.pop(given, None)  # renewed long enough: let it come back
                continue
            try:
                newer = await self.change(
                    tracked.group, tracked.topic, tracked.handle, self.slice_ms
                )
            except Exception as exc:  # acked meanwhile, or the broker is gone: stop
                log.info("proxy.renew_failed", handle=tracked.handle, error=str(exc))
                self.tracked.pop(given, None)
                continue
            if given in self.tracked:  # not settled while the change was under way
                tracked.handle, tracked.expires_ms = newer, _expiry(newer)

    async def release(self, client_id: str) -> None:
        """The client went away: its unacked messages come back soon, to the others."""
        for given, tracked in list(self.tracked.items()):
            if tracked.client_id != client_id:
                continue
            self.tracked.pop(given, None)
            try:
                await self.change(tracked.group, tracked.topic, tracked.handle, RELEASE_MS)
            except Exception as exc:
                log.info("proxy.release_failed", handle=tracked.handle, error=str(exc))

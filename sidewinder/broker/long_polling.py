"""Held pulls (RocketMQ's PullRequestHoldService): a pull that finds nothing waits until a
message arrives in its queue or its suspend time runs out, then is served again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(eq=False)
class HeldPull:
    topic: str
    queue_id: int
    offset: int
    retry: Callable[[], None]  # serve the pull again and answer it
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)
    done: bool = False


class PullHolds:
    def __init__(self) -> None:
        self._held: dict[tuple[str, int], list[HeldPull]] = {}

    def hold(self, pull: HeldPull, timeout_s: float) -> None:
        self._held.setdefault((pull.topic, pull.queue_id), []).append(pull)
        pull.timer = asyncio.get_running_loop().call_later(timeout_s, self._expire, pull)

    def _expire(self, pull: HeldPull) -> None:
        held = self._held.get((pull.topic, pull.queue_id))
        if held is not None and pull in held:
            held.remove(pull)
            if not held:
                del self._held[(pull.topic, pull.queue_id)]
        self._wake(pull)

    def arrived(self, topic: str, queue_id: int, max_offset: int) -> None:
        """The store dispatched messages up to `max_offset`: wake pulls waiting below it."""
        held = self._held.get((topic, queue_id))
        if not held:
            return
        ready = [p for p in held if p.offset < max_offset]
        if not ready:
            return
        remaining = [p for p in held if p.offset >= max_offset]
        if remaining:
            self._held[(topic, queue_id)] = remaining
        else:
            del self._held[(topic, queue_id)]
        for pull in ready:
            self._wake(pull)

    def _wake(self, pull: HeldPull) -> None:
        if pull.done:
            return
        pull.done = True
        if pull.timer is not None:
            pull.timer.cancel()
        pull.retry()

    def release_all(self) -> None:
        """Answer every held pull now (shutdown)."""
        for held in list(self._held.values()):
            for pull in held:
                self._wake(pull)
        self._held.clear()

    @property
    def count(self) -> int:
        return sum(len(h) for h in self._held.values())

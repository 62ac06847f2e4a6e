"""The lean load generator's shapes against Redis Streams, the peer outside RocketMQ's protocol.

    load = uvloop.run(redis_produce(addr, "BenchLean1K", body, 8, 4, 64, seconds=5, meter=m))
    load = uvloop.run(redis_read(addr, "BenchLean1K", last_ids, offsets, targets, ...))

A topic's queue is a stream `topic:queue`. XADD commands are encoded once per stream and
pipelined, `window` per connection, round-robin over the streams; Redis answers in order, so
replies are matched to their send times first in, first out. XREAD COUNT 32 keeps one request in
flight per stream (as a pull keeps one per queue) until each stream's count reaches what was
produced. hiredis parses the replies: `pip install -e '.[bench]'`.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from loadgen import (
    PULL_BATCH,
    PULL_RETRY_S,
    Load,
    LoadProtocol,
    Meter,
    Reader,
    Sender,
    closed_loop,
    read_back,
)

MAX_NOTES = 5  # error replies quoted per slice


def resp(*args: bytes) -> bytes:
    """One command in RESP (an array of bulk strings)."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


def stream_key(topic: str, queue: int) -> bytes:
    return f"{topic}:{queue}".encode()


class _RedisLoad(LoadProtocol, asyncio.Protocol):
    def __init__(self, done: asyncio.Future[None], load: Load) -> None:
        import hiredis  # only the Redis peer needs it

        super().__init__(done)
        self.load = load
        self.reader = hiredis.Reader()
        self.error_type = hiredis.ReplyError

    def failed_reply(self, reply: Any) -> bool:
        if not isinstance(reply, self.error_type):
            return False
        self.load.failed[-1] = self.load.failed.get(-1, 0) + 1
        if len(self.load.notes) < MAX_NOTES:
            self.load.notes.append(f"redis: {reply}")
        return True


class RedisAddConnection(_RedisLoad, Sender):
    """`window` XADDs pipelined, round-robin over one stream per queue."""

    def __init__(
        self, done: asyncio.Future[None], commands: list[bytes], first_queue: int, load: Load
    ) -> None:
        super().__init__(done, load)
        self.commands = commands
        self.first_queue = first_queue
        self.sent = 0
        self.sent_at: deque[int] = deque()
        self.acked = 0

    def send(self, count: int, now: int) -> None:
        commands, queues, turn = self.commands, len(self.commands), self.first_queue + self.sent
        assert self.transport is not None
        self.transport.writelines([commands[(turn + i) % queues] for i in range(count)])
        self.sent += count
        self.sent_at.extend([now] * count)
        self.inflight += count
        self.load.requests += count

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter_ns()
        self.reader.feed(data)
        gets, popleft = self.reader.gets, self.sent_at.popleft
        append = self.load.latencies_ns.append
        replies = 0
        while (reply := gets()) is not False:
            replies += 1
            append(now - popleft())
            if type(reply) is not bytes and self.failed_reply(reply):
                self.fail("an XADD was refused")  # counts per stream would be off
                return
        self.acked += replies
        self.answered(replies, now)

    def count_per_queue(self, per_queue: list[int]) -> int:
        """Add each stream's acknowledged XADDs (in order, from `first_queue` on)."""
        queues = len(self.commands)
        for queue in range(queues):
            turns = (queue - self.first_queue) % queues
            per_queue[queue] += self.acked // queues + (1 if turns < self.acked % queues else 0)
        return self.acked


class RedisReadConnection(_RedisLoad, Reader):
    """XREAD COUNT 32, one in flight per stream, until each stream's count reaches its target."""

    def __init__(
        self,
        done: asyncio.Future[None],
        keys: list[bytes],
        last_ids: list[bytes],
        offsets: list[int],
        targets: list[int],
        load: Load,
    ) -> None:
        super().__init__(done, load)
        self.keys = keys
        self.last_ids = last_ids  # advanced in place, with offsets (entries read so far)
        self.offsets = offsets
        self.targets = targets
        self.pending: deque[tuple[int, int]] = deque()  # (stream, sent ns), in request order
        self.retries = 0

    def read(self, queue: int) -> None:
        if self.offsets[queue] >= self.targets[queue] or time.perf_counter_ns() >= self.deadline_ns:
            self.finish_if_idle()
            return
        count = b"%d" % PULL_BATCH
        self.pending.append((queue, time.perf_counter_ns()))
        self.inflight += 1
        self.load.requests += 1
        assert self.transport is not None
        self.transport.write(
            resp(b"XREAD", b"COUNT", count, b"STREAMS", self.keys[queue], self.last_ids[queue])
        )

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter_ns()
        self.reader.feed(data)
        load = self.load
        while (reply := self.reader.gets()) is not False:
            queue, sent = self.pending.popleft()
            self.inflight -= 1
            load.answered += 1
            load.latencies_ns.append(now - sent)
            if self.failed_reply(reply):
                continue
            entries = reply[0][1] if reply else []  # [[key, [[id, [field, value]], ...]]]
            if entries:
                self.last_ids[queue] = entries[-1][0]
                self.offsets[queue] += len(entries)
                load.messages += len(entries)
                load.per_queue[queue] += len(entries)
                self.read(queue)
            else:  # nothing new yet (cannot happen once XADD answered, but stay correct)
                self.retries += 1
                self.inflight += 1
                asyncio.get_running_loop().call_later(PULL_RETRY_S, self._retry, queue)
        self.finish_if_idle()

    def _retry(self, queue: int) -> None:
        self.inflight -= 1
        self.read(queue)


async def redis_produce(
    addr: tuple[str, int],
    topic: str,
    body: bytes,
    queues: int,
    connections: int,
    window: int,
    *,
    seconds: float,
    meter: Meter,
) -> Load:
    """XADD `topic:<queue>` * body <body>, `connections` × `window` pipelined, for `seconds`."""
    commands = [resp(b"XADD", stream_key(topic, q), b"*", b"body", body) for q in range(queues)]
    load = Load(per_queue=[0] * queues)
    return await closed_loop(
        addr,
        lambda done, first: RedisAddConnection(done, commands, first, load),
        queues=queues,
        connections=connections,
        window=window,
        seconds=seconds,
        meter=meter,
        load=load,
    )


async def redis_read(
    addr: tuple[str, int],
    topic: str,
    last_ids: list[bytes],
    offsets: list[int],
    targets: list[int],
    *,
    seconds: float,
    meter: Meter,
) -> Load:
    """XREAD each stream after `last_ids` (advanced in place) up to `targets`, `seconds` at most."""
    load = Load(per_queue=[0] * len(targets))
    keys = [stream_key(topic, q) for q in range(len(targets))]
    return await read_back(
        addr,
        lambda done: RedisReadConnection(done, keys, last_ids, offsets, targets, load),
        queues=len(targets),
        seconds=seconds,
        meter=meter,
        load=load,
    )

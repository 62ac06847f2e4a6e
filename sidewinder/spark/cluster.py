"""What the data sources ask the cluster, blocking, over our async client on a loop thread.

    cluster = shared_cluster("127.0.0.1:9876")   # one per Python worker and name server list
    queues = cluster.read_queues("Orders")
    low, high = cluster.bounds(queues[0])
    for messages in cluster.pull_range(queues[0], low, high, Subscription.of("Orders", "*")):
        ...

Spark reuses Python workers across tasks, so `shared_cluster` keeps one client (its connections
and route cache) per process for every task that runs there; nothing here assumes the driver and
the executors share a process.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any, TypeVar

from sidewinder.client.admin import Admin
from sidewinder.client.producer import Message, Producer
from sidewinder.client.pulling import (
    ReceivedMessage,
    commit_offset,
    offset_at,
    pull,
    queue_bound,
)
from sidewinder.client.route_cache import ClientError, MessageQueue
from sidewinder.common.loop_thread import LoopThread
from sidewinder.protocol.acl import Credentials
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.message import MessageConst
from sidewinder.protocol.record import MessageRecord, decode_record
from sidewinder.protocol.subscription import Subscription
from sidewinder.remoting.tls import TlsConfig

log = logging.getLogger(__name__)
T = TypeVar("T")
READER_GROUP = "SIDEWINDER_SPARK_READER"  # pulls carry a group; this one never commits
PRODUCER_GROUP = "SIDEWINDER_SPARK_WRITER"
# System topics a subscribePattern never matches (RocketMQ's own and the per-group ones).
SYSTEM_TOPIC_PREFIXES = ("%RETRY%", "%DLQ%", "RMQ_SYS_", "SCHEDULE_TOPIC_", "TBW102", "rmq_sys_")
PULLS_IN_FLIGHT = 8  # per queue range, when the offsets are dense (no tag filter)
STALLED_PULLS = 50  # answers that do not move the offset (retry-immediately) before giving up
SEND_BATCH, SEND_BATCH_BYTES = 64, 1 << 20  # per SEND_BATCH_MESSAGE (the broker takes 4 MiB)


class DataLossError(RuntimeError):
    """Offsets a query needs are gone from the broker (cleaned up, or the queue was removed)."""


class Cluster:
    def __init__(
        self,
        namesrv_addr: str,
        credentials: Credentials | None = None,
        tls: TlsConfig | None = None,
    ) -> None:
        """`credentials`: the ACL keys every request is signed with; `tls`: connect with TLS."""
        self.namesrv_addr = namesrv_addr
        self._keys: dict[str, Any] = {
            "access_key": credentials.access_key if credentials else None,
            "secret_key": credentials.secret_key if credentials else None,
            "tls": tls or False,  # never a tool's DEFAULT_CLIENT_TLS: what the options say
        }
        self._thread = LoopThread("sidewinder-spark")
        self._admin: Admin = self._call(_make(lambda: Admin(namesrv_addr, **self._keys)))
        self._producer: Producer | None = None

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._thread.call(coroutine)

    def close(self) -> None:
        try:
            if self._producer is not None:
                self._call(self._producer.close())
            self._call(self._admin.close())
        finally:
            self._thread.stop()

    # -- metadata --------------------------------------------------------------------------------
    def topics(self) -> list[str]:
        return [
            t for t in self._call(self._admin.topics()) if not t.startswith(SYSTEM_TOPIC_PREFIXES)
        ]

    def read_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, sorted; [] when the name server knows no such topic."""
        route = self._call(self._admin.routes.route(topic, refresh=True))
        return sorted(route.read_queues) if route else []

    def bounds(self, queue: MessageQueue) -> tuple[int, int]:
        """(min offset, max offset) of a queue: the next message will get the max offset."""
        addr = self._master(queue)
        low = self._call(queue_bound(self._admin.remoting, addr, queue, RequestCode.GET_MIN_OFFSET))
        high = self._call(
            queue_bound(self._admin.remoting, addr, queue, RequestCode.GET_MAX_OFFSET)
        )
        return low, high

    def offset_at(self, queue: MessageQueue, timestamp_ms: int) -> int:
        """The first offset whose message was stored at or after `timestamp_ms` (the max offset
        when none was). The broker's search by time answers the *nearest* message, before or
        after, so its answer is refined from the messages around it."""
        low, high = self.bounds(queue)
        guess = self._call(
            offset_at(self._admin.remoting, self._master(queue), queue, timestamp_ms)
        )
        guess = min(max(guess, low), high)
        everything = Subscription.of(queue.topic, "*")
        # Back off until the window starts before the answer (or at the queue's start)...
        start = guess
        while start > low:
            start = max(start - 32, low)
            first = next(self.pull_range(queue, start, start + 1, everything), [])
            if first and first[0].store_timestamp < timestamp_ms:
                break
        # ...then walk forward to the first message stored at or after the time.
        for messages in self.pull_range(queue, start, high, everything):
            for message in messages:
                if message.store_timestamp >= timestamp_ms:
                    return message.queue_offset
        return high

    def commit_offsets(self, group: str, offsets: dict[MessageQueue, int]) -> None:
        async def commit_all() -> None:
            await asyncio.gather(
                *(
                    commit_offset(self._admin.remoting, self._master(q), group, q, offset)
                    for q, offset in offsets.items()
                )
            )

        self._call(commit_all())

    def _master(self, queue: MessageQueue) -> str:
        route = self._admin.routes.routes.get(queue.topic)
        addr = route.master(queue.broker_name) if route else None
        if addr is None:
            route = self._call(self._admin.routes.route(queue.topic, refresh=True))
            addr = route.master(queue.broker_name) if route else None
        if addr is None:
            raise ClientError(
                ResponseCode.TOPIC_NOT_EXIST, f"no master of {queue.broker_name} for {queue.topic}"
            )
        return addr

    # -- reading ---------------------------------------------------------------------------------
    def pull_range(
        self,
        queue: MessageQueue,
        start: int,
        end: int,
        subscription: Subscription,
        *,
        batch: int = 32,
        fail_on_data_loss: bool = True,
    ) -> Iterator[list[ReceivedMessage]]:
        """The messages of `queue` with start <= queue offset < end, in order, in pulled chunks.

        Without a tag filter offsets are dense, so several pulls are sent at once (the broker
        answers at most 32 messages or 256 KiB each); a short answer is followed by a pull
        for the gap, so nothing is skipped."""
        addr = self._master(queue)
        offset = start
        stalled = 0
        while offset < end:
            chunks = self._call(
                self._pull_window(addr, queue, offset, end, subscription, batch, fail_on_data_loss)
            )
            stalled = stalled + 1 if chunks[-1][1] <= offset else 0
            if stalled > STALLED_PULLS:
                raise RuntimeError(
                    f"{queue.topic} {queue.broker_name}:{queue.queue_id}: {stalled} pulls at "
                    f"offset {offset} did not move on (range ends at {end})"
                )
            for messages, next_offset in chunks:
                if messages:
                    yield messages
                offset = next_offset
                if offset >= end:
                    break

    async def _pull_window(
        self,
        addr: str,
        queue: MessageQueue,
        offset: int,
        end: int,
        subscription: Subscription,
        batch: int,
        fail_on_data_loss: bool,
    ) -> list[tuple[list[ReceivedMessage], int]]:
        """Pulls from `offset`, in order, up to the first one that did not reach the next."""
        dense = subscription.codes is None and subscription.expression_type == "TAG"
        starts = [offset]
        if dense:
            starts = list(range(offset, end, batch))[:PULLS_IN_FLIGHT]
        results = await asyncio.gather(
            *(
                pull(
                    self._admin.remoting,
                    addr,
                    READER_GROUP,
                    queue,
                    at,
                    subscription,
                    batch=min(batch, end - at),
                    suspend_s=None,
                )
                for at in starts
            )
        )
        chunks = []
        for at, result in zip(starts, results, strict=True):
            if result.code == ResponseCode.PULL_OFFSET_MOVED or (
                result.code == ResponseCode.PULL_NOT_FOUND and result.next_offset > at
            ):
                _data_loss(queue, at, result.next_offset, fail_on_data_loss)
            elif result.code == ResponseCode.PULL_NOT_FOUND:
                raise DataLossError(
                    f"{queue.topic} {queue.broker_name}:{queue.queue_id}: no message at {at} "
                    f"though the range ends at {end}"
                )
            messages = [m for m in result.messages if m.queue_offset < end]
            next_offset = max(result.next_offset, at)
            if result.code == ResponseCode.PULL_OFFSET_MOVED and next_offset <= at:
                next_offset = end  # nothing left to read here
            chunks.append((messages, next_offset))
            if next_offset < end and len(starts) > 1 and next_offset != at + batch:
                break  # a short answer: continue from where it stopped
        return chunks

    # -- writing ---------------------------------------------------------------------------------
    def producer(self) -> Producer:
        if self._producer is None:
            self._producer = self._call(
                _make(lambda: Producer(PRODUCER_GROUP, self.namesrv_addr, **self._keys))
            )
        return self._producer

    def write_queues(self, topic: str) -> list[MessageQueue]:
        return self._call(self.producer().queues(topic))

    def send_all(self, messages: Sequence[tuple[Message, MessageQueue | None]]) -> None:
        """Send every message to its queue (None: spread round robin), each queue's messages
        in order: SEND_BATCH_MESSAGE of up to SEND_BATCH messages (or bytes) at a time, one
        batch in flight per queue and every queue at once; delayed messages go one by one."""
        producer = self.producer()
        per_queue: dict[MessageQueue | None, list[Message]] = {}
        for message, queue in messages:
            per_queue.setdefault(queue, []).append(message)
        unrouted = per_queue.pop(None, [])
        if unrouted:
            topics = {m.topic for m in unrouted}
            turns = {t: self.write_queues(t) for t in topics}
            for at in range(0, len(unrouted), SEND_BATCH):
                for message in unrouted[at : at + SEND_BATCH]:
                    choices = turns[message.topic]
                    queue = choices[(at // SEND_BATCH) % len(choices)]
                    per_queue.setdefault(queue, []).append(message)

        async def send_queue(queue: MessageQueue, queued: list[Message]) -> None:
            batch: list[Message] = []
            size = 0
            for message in queued:
                if message.delay_level:
                    await producer.send(message, queue=queue)  # a batch has no delay levels
                    continue
                batch.append(message)
                size += len(message.body)
                if len(batch) >= SEND_BATCH or size >= SEND_BATCH_BYTES:
                    await producer.send_batch(batch, queue=queue)
                    batch, size = [], 0
            if batch:
                await producer.send_batch(batch, queue=queue)

        async def send_everything() -> None:
            await asyncio.gather(*(send_queue(q, ms) for q, ms in per_queue.items() if q))

        self._call(send_everything())

    def query_ids(self, topic: str, ids: Sequence[str]) -> set[str]:
        """Which of the UNIQ_KEYs `ids` the topic holds, by the broker's key index (one
        QUERY_MESSAGE each, 64 at a time); none when the topic does not exist."""
        if self.read_queues(topic) == []:
            return set()

        async def stored(uniq: str) -> bool:
            for data in await self._admin.query_by_key(topic, uniq, 4):
                at = 0
                while at < len(data):  # the reply holds whole records (hash collisions too)
                    record = decode_record(data, at)
                    if not isinstance(record, MessageRecord):
                        break
                    if record.properties().get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == uniq:
                        return True
                    at += record.total_size
            return False

        async def query_all() -> set[str]:
            found: set[str] = set()
            for at in range(0, len(ids), 64):
                window = ids[at : at + 64]
                hits = await asyncio.gather(*(stored(uniq) for uniq in window))
                found.update(uniq for uniq, hit in zip(window, hits, strict=True) if hit)
            return found

        return self._call(query_all())


def _data_loss(queue: MessageQueue, at: int, moved_to: int, fail: bool) -> None:
    """The broker sent a pull at `at` to `moved_to`: the offsets between are gone (or, moved
    back, the queue is shorter than the reader's offset). DataLossError, or a warning."""
    named = f"{queue.topic} {queue.broker_name}:{queue.queue_id}"
    if moved_to > at:
        lost = (
            f"{named}: offsets {at}..{moved_to - 1} are gone "
            f"(cleaned up; the queue now starts at {moved_to})"
        )
    else:
        lost = f"{named}: offset {at} is past the queue's end {moved_to} (made again?)"
    if fail:
        raise DataLossError(f"{lost}; set failOnDataLoss=false to skip them")
    log.warning("%s; skipped them (failOnDataLoss=false)", lost)


async def _make(factory: Any) -> Any:
    return factory()  # built on the loop thread: the client binds to its running loop


_shared: dict[tuple[str, Credentials | None, TlsConfig | None], Cluster] = {}
_shared_lock = threading.Lock()


def shared_cluster(
    namesrv_addr: str, credentials: Credentials | None = None, tls: TlsConfig | None = None
) -> Cluster:
    """This process's client for `namesrv_addr` (and these ACL keys and TLS settings), made on
    first use and kept for later tasks."""
    key = (namesrv_addr, credentials, tls)
    with _shared_lock:
        cluster = _shared.get(key)
        if cluster is None:
            cluster = _shared[key] = Cluster(namesrv_addr, credentials, tls)
        return cluster

"""The push consumer: subscribe, give it a listener, and messages arrive (RocketMQ's
DefaultMQPushConsumer with concurrent listeners).

    consumer = PushConsumer("billing", "127.0.0.1:9876")
    consumer.subscribe("Orders", "paid || refunded")

    async def on_messages(messages: list[ReceivedMessage]) -> ConsumeStatus:
        ...
        return ConsumeStatus.SUCCESS          # None means success too; raising means later

    consumer.listener = on_messages           # a plain function runs on a thread pool instead
    await consumer.start()
    ...
    await consumer.close()                    # waits for running listeners, commits offsets

Clustering groups share the topic's queues (average allocation, rebalanced when a member joins
or leaves, and every 20 s) and commit offsets to the brokers every 5 s and on close. A message
whose listener fails goes back to the broker (CONSUMER_SEND_MSG_BACK) and returns through
%RETRY%<group> after a delay, up to `max_reconsume_times`, then to %DLQ%<group>. Broadcasting
groups read every queue and keep offsets in a local file.

Each queue has one long-polling pull loop. Its committed offset is the lowest offset still being
consumed, so a crash redelivers (at least once) rather than skips.

With `pop=True` it consumes as RocketMQ 5's push consumer does for a group in POP mode (see
client/pop_delivery.py): the brokers hand out the messages, a consumed one is acked, a failed one
comes back after a retry delay; nothing is owned or committed by the client.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from sidewinder.client.client_calls import CONSUMER_CALL_CODES, ConsumerCalls
from sidewinder.client.membership import (
    BROADCASTING,
    CLUSTERING,
    RETRY_GROUP_TOPIC_PREFIX,
    GroupMember,
)
from sidewinder.client.offset_store import (
    DEFAULT_LOCAL_DIR,
    BrokerOffsetStore,
    LocalOffsetStore,
    OffsetStore,
)
from sidewinder.client.pop_client import PopClient, PoppedMessage
from sidewinder.client.pop_delivery import PopDelivery
from sidewinder.client.pulling import ReceivedMessage, offset_at, pull, queue_bound
from sidewinder.client.route_cache import MASTER_ID, ClientError, MessageQueue, check_reply
from sidewinder.common.log import library_logger
from sidewinder.protocol.codes import RequestCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import ConsumerSendMsgBackRequestHeader
from sidewinder.protocol.pop import ConsumeInitMode
from sidewinder.remoting.connection import RemotingError
from sidewinder.remoting.tls import TlsOption

log = library_logger(__name__)


# Where a POP-mode group starts reading a queue it never read.
POP_CONSUME_FROM = {"last": ConsumeInitMode.MAX, "first": ConsumeInitMode.MIN}


class ConsumeStatus(enum.Enum):
    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


Listener = (
    Callable[[list[ReceivedMessage]], ConsumeStatus | None]
    | Callable[[list[ReceivedMessage]], Awaitable[ConsumeStatus | None]]
)


@dataclass(eq=False)
class _ProcessQueue:
    """One assigned queue: its pull position and the messages taken but not yet consumed."""

    queue: MessageQueue
    next_offset: int = -1
    in_flight: dict[int, ReceivedMessage] = field(default_factory=dict)
    dropped: bool = False
    task: asyncio.Task[None] | None = None
    last_pull_ms: int = 0  # for GET_CONSUMER_RUNNING_INFO, as Java's ProcessQueue keeps them
    last_consume_ms: int = 0
    read_from: int = MASTER_ID  # the broker id the last pull reply suggested

    def consumed_up_to(self) -> int:
        """The offset to commit: the lowest still in flight, else where the next pull starts."""
        return min(self.in_flight) if self.in_flight else self.next_offset


class PushConsumer:
    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        listener: Listener | None = None,
        message_model: str = CLUSTERING,
        consume_from: str = "last",
        consume_timestamp_ms: int | None = None,
        consume_concurrency: int = 20,
        batch_size: int = 1,
        pull_batch_size: int = 32,
        pull_threshold_per_queue: int = 1000,
        max_reconsume_times: int = 16,
        suspend_s: float = 15.0,
        persist_interval_s: float = 5.0,
        rebalance_interval_s: float = 20.0,
        heartbeat_interval_s: float = 30.0,
        instance_name: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        offset_store_dir: Path = DEFAULT_LOCAL_DIR,
        tls: TlsOption = None,
        pop: bool = False,
        pop_invisible_s: float = 60.0,
    ) -> None:
        if consume_concurrency < 1 or batch_size < 1 or pull_batch_size < 1:
            raise ValueError("consume_concurrency, batch_size and pull_batch_size must be >= 1")
        if pop and (message_model != CLUSTERING or consume_from not in POP_CONSUME_FROM):
            raise ValueError("pop=True is for clustering groups consuming from first or last")
        self.group = group
        self.listener = listener
        self.member = GroupMember(
            group,
            namesrv_addr,
            consume_type="CONSUME_PASSIVELY",
            message_model=message_model,
            consume_from=consume_from,
            instance_name=instance_name,
            access_key=access_key,
            secret_key=secret_key,
            tls=tls,
        )
        self.offsets: OffsetStore = (
            LocalOffsetStore(offset_store_dir, self.member.client_id, group)
            if message_model == BROADCASTING
            else BrokerOffsetStore(self.member)
        )
        self.consume_timestamp_ms = consume_timestamp_ms
        self.consume_concurrency = consume_concurrency
        self.batch_size = batch_size
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_per_queue = pull_threshold_per_queue
        self.max_reconsume_times = max_reconsume_times
        self.suspend_s = suspend_s
        self.persist_interval_s = persist_interval_s
        self.rebalance_interval_s = rebalance_interval_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.process_queues: dict[MessageQueue, _ProcessQueue] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._consuming: set[asyncio.Task[None]] = set()
        self._slots: asyncio.Semaphore | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._running = False
        self.member.table.register(ConsumerCalls(self), *CONSUMER_CALL_CODES)
        self.pop: PopDelivery | None = None
        if pop:
            self.pop = PopDelivery(
                PopClient(group, self.member.remoting, self.member.routes),
                self.member.subscriptions,
                self._consume_popped,
                lambda: self._running,
                init_mode=POP_CONSUME_FROM[consume_from],
                batch=min(pull_batch_size, 32),
                batch_size=batch_size,
                invisible_s=pop_invisible_s,
                await_s=suspend_s,
                max_in_flight=pull_threshold_per_queue,
            )

    @property
    def client_id(self) -> str:
        return self.member.client_id

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        """Consume `topic`'s messages matching a tag expression (`*`, `A || B`) or SQL92."""
        self.member.subscribe(topic, expression, expression_type)
        self.member.subscriptions[topic].sub_version = int(time.time() * 1000)

    def assignment(self) -> list[MessageQueue]:
        return sorted(self.process_queues)

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        if self.listener is None:
            raise ValueError("set a listener before start()")
        if not self.member.subscriptions:
            raise ValueError("subscribe to a topic before start()")
        if self._running:
            return
        # POP reads the group's retry topic on the broker's side.
        if self.member.message_model == CLUSTERING and self.pop is None:
            retry_topic = RETRY_GROUP_TOPIC_PREFIX + self.group
            self.member.subscribe(retry_topic, "*")
        self._slots = asyncio.Semaphore(self.consume_concurrency)
        if not inspect.iscoroutinefunction(self.listener):
            self._executor = ThreadPoolExecutor(
                self.consume_concurrency, thread_name_prefix=f"consume-{self.group}"
            )
        self._running = True
        # As the Java client: routes, a heartbeat to every broker in them, a rebalance at once.
        apply = self._apply if self.pop is None else self.pop.apply
        settled = await self.member.rebalance(apply, heartbeat=True)
        loop = asyncio.get_running_loop()
        maintain = self.member.maintain(
            apply,
            running=lambda: self._running,
            rebalance_interval_s=self.rebalance_interval_s,
            heartbeat_interval_s=self.heartbeat_interval_s,
            settled=settled,
        )
        self._tasks = [loop.create_task(maintain)]
        if self.pop is None:
            self._tasks.append(loop.create_task(self._persist_loop()))

    async def close(self, *, drain_timeout_s: float = 10.0) -> None:
        """Stop pulling, let running listeners finish, commit offsets, leave the group."""
        if not self._running:
            await self.member.close()
            return
        self._running = False
        for pq in self.process_queues.values():
            pq.dropped = True
        tasks = [*self._tasks, *(pq.task for pq in self.process_queues.values() if pq.task)]
        for task in tasks:
            task.cancel()
        # Bounded: on 3.11 a cancel that races a reply can be swallowed by wait_for, and the
        # loops then end by their flags after at most one more long poll.
        await asyncio.wait(tasks, timeout=self.suspend_s + 1)
        if self.pop is not None:
            await self.pop.close(drain_timeout_s)
        if self._consuming:
            await asyncio.wait(self._consuming, timeout=drain_timeout_s)
        try:
            await self._persist()
            await self.member.unregister()
        finally:
            await self.member.close()
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)

    async def _persist_loop(self) -> None:
        while self._running:
            await asyncio.sleep(self.persist_interval_s)
            await self._persist()

    async def _persist(self) -> None:
        offsets = {
            q: pq.consumed_up_to() for q, pq in self.process_queues.items() if pq.next_offset >= 0
        }
        if offsets:
            await self.offsets.persist(offsets)

    async def _apply(self, mine: set[MessageQueue]) -> None:
        """Take the queues newly ours, let go of the ones no longer ours (committing them)."""
        removed = [pq for q, pq in self.process_queues.items() if q not in mine]
        for pq in removed:
            pq.dropped = True
            if pq.task is not None:
                pq.task.cancel()
            del self.process_queues[pq.queue]
        if removed:
            await self.offsets.persist(
                {pq.queue: pq.consumed_up_to() for pq in removed if pq.next_offset >= 0}
            )
        added = sorted(mine - self.process_queues.keys())
        loop = asyncio.get_running_loop()
        for queue in added:
            pq = _ProcessQueue(queue)
            pq.task = loop.create_task(self._pull_loop(pq))
            self.process_queues[queue] = pq
        if removed or added:
            log.info(
                "client.rebalanced",
                group=self.group,
                added=len(added),
                removed=len(removed),
                queues=len(self.process_queues),
            )

    # -- pulling ---------------------------------------------------------------------------------
    async def _start_offset(self, queue: MessageQueue) -> int:
        stored = await self.offsets.read(queue)
        if stored >= 0:
            return stored
        addr, _ = await self.member.reader_of(queue)
        remoting = self.member.remoting
        is_retry = queue.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        if self.member.consume_from == "first" or (is_retry and self.member.consume_from == "last"):
            return 0
        if self.member.consume_from == "timestamp" and not is_retry:
            at = self.consume_timestamp_ms or int(time.time() * 1000) - 30 * 60 * 1000
            return await offset_at(remoting, addr, queue, at)
        return await queue_bound(remoting, addr, queue, RequestCode.GET_MAX_OFFSET)

    async def _pull_loop(self, pq: _ProcessQueue) -> None:
        queue = pq.queue
        while not pq.dropped:
            try:
                if pq.next_offset < 0:
                    pq.next_offset = await self._start_offset(queue)
                if len(pq.in_flight) >= self.pull_threshold_per_queue:
                    await asyncio.sleep(0.05)  # flow control: the listeners are behind
                    continue
                addr, master = await self.member.reader_of(queue, pq.read_from)
                clustering = self.member.message_model == CLUSTERING
                commit = pq.consumed_up_to() if clustering and master else -1
                result = await pull(
                    self.member.remoting,
                    addr,
                    self.group,
                    queue,
                    pq.next_offset,
                    self.member.subscriptions[queue.topic],
                    batch=self.pull_batch_size,
                    suspend_s=self.suspend_s,
                    commit_offset=commit,
                )
            except (ClientError, RemotingError, OSError) as exc:
                log.warning("client.pull_failed", queue=str(queue), error=str(exc))
                if not isinstance(exc, ClientError):
                    # Its broker may be gone (a dead master): ask for the route again before
                    # the next pull, which then goes to whoever of the group is left.
                    self.member.routes.expire(queue.topic)
                await asyncio.sleep(3)  # Java's pullTimeDelayMillsWhenException
                continue
            if pq.dropped:
                return
            pq.last_pull_ms = int(time.time() * 1000)
            pq.read_from = result.suggested_broker_id
            if result.stale_subscription:
                await self.member.heartbeat()
                await asyncio.sleep(0.05)
                continue
            for message in result.messages:
                pq.in_flight[message.queue_offset] = message
            pq.next_offset = result.next_offset
            for start in range(0, len(result.messages), self.batch_size):
                self._submit(pq, result.messages[start : start + self.batch_size])

    # -- consuming -------------------------------------------------------------------------------
    def _submit(self, pq: _ProcessQueue, messages: list[ReceivedMessage]) -> None:
        task = asyncio.get_running_loop().create_task(self._consume(pq, messages))
        self._consuming.add(task)
        task.add_done_callback(self._consuming.discard)

    async def _listen(self, messages: list[ReceivedMessage]) -> ConsumeStatus | None:
        """The listener's answer; RECONSUME_LATER when it raised."""
        assert self.listener is not None
        try:
            if self._executor is not None:
                loop = asyncio.get_running_loop()
                status = await loop.run_in_executor(self._executor, self.listener, messages)
            else:
                status = await self.listener(messages)  # type: ignore[misc]
            return status  # type: ignore[return-value]
        except Exception as exc:
            log.warning("client.listener_failed", group=self.group, error=repr(exc))
            return ConsumeStatus.RECONSUME_LATER

    async def _consume_popped(self, messages: list[PoppedMessage]) -> bool:
        assert self._slots is not None
        async with self._slots:
            status = await self._listen(list(messages))
        return status is not ConsumeStatus.RECONSUME_LATER

    async def _consume(self, pq: _ProcessQueue, messages: list[ReceivedMessage]) -> None:
        assert self._slots is not None
        async with self._slots:
            if pq.dropped:
                return
            status = await self._listen(messages)
            pq.last_consume_ms = int(time.time() * 1000)
        if status is ConsumeStatus.RECONSUME_LATER and self.member.message_model == CLUSTERING:
            retry_locally = [m for m in messages if not await self._send_back(m)]
            if retry_locally:
                # The broker would not take them back: try them here again a little later.
                await asyncio.sleep(5)
                if not pq.dropped and self._running:
                    self._submit(pq, retry_locally)
                for message in messages:
                    if message not in retry_locally:
                        pq.in_flight.pop(message.queue_offset, None)
                return
        for message in messages:
            pq.in_flight.pop(message.queue_offset, None)

    async def _send_back(self, message: ReceivedMessage) -> bool:
        header = ConsumerSendMsgBackRequestHeader(
            offset=message.commit_log_offset,
            group=self.group,
            delay_level=0,  # the broker picks 3 + reconsume times
            origin_msg_id=message.msg_id,
            origin_topic=message.topic,
            unit_mode=False,
            max_reconsume_times=self.max_reconsume_times,
        )
        request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext())
        try:
            reply = await self.member.remoting.invoke(
                await self.member.broker_of(message.queue), request, 5
            )
            check_reply(reply)
        except (ClientError, RemotingError, OSError) as exc:
            log.warning("client.send_back_failed", msg_id=message.msg_id, error=str(exc))
            return False
        return True

    # -- answers to the broker's calls (client_calls.py) ------------------------------------------
    def offset_table(self, topic: str) -> dict[MessageQueue, int]:
        """What this member has consumed of `topic`'s queues (Java's cloneOffsetTable)."""
        return {
            q: pq.consumed_up_to()
            for q, pq in self.process_queues.items()
            if q.topic == topic and pq.next_offset >= 0
        }

    async def reset_offsets(self, offsets: dict[MessageQueue, int]) -> None:
        """Move these queues to new offsets (an admin's resetOffsetByTime): drop them with what
        they hold, store the offsets, then rebalance, which takes them again from there."""
        if not offsets:
            return
        for queue in offsets:
            pq = self.process_queues.pop(queue, None)
            if pq is not None:
                pq.dropped = True
                pq.in_flight.clear()
                if pq.task is not None:
                    pq.task.cancel()
        await self.offsets.persist(offsets)
        self.member.changed.set()

    async def consume_directly(self, message: ReceivedMessage) -> dict[str, object]:
        """Run the listener on one message for CONSUME_MESSAGE_DIRECTLY; the outcome as
        ConsumeMessageDirectlyResult (nothing is sent back or committed)."""
        assert self.listener is not None
        started = time.monotonic()
        remark = None
        try:
            if inspect.iscoroutinefunction(self.listener):
                status = await self.listener([message])
            else:
                loop = asyncio.get_running_loop()
                status = await loop.run_in_executor(self._executor, self.listener, [message])
            if status is None or status is ConsumeStatus.SUCCESS:
                result = "CR_SUCCESS"
            else:
                result = "CR_LATER"
        except Exception as exc:
            result, remark = "CR_THROW_EXCEPTION", repr(exc)
        return {
            "autoCommit": True,
            "consumeResult": result,
            "order": False,
            "remark": remark,
            "spentTimeMills": int((time.monotonic() - started) * 1000),
        }

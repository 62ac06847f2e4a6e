"""The revive service (RocketMQ 5's PopReviveService): reads each revive queue as the group
CID_RMQ_SYS_REVIVE_GROUP, matches ACK records to the CK they name, and once a CK's revive time
has passed (and the timer has put every ack due by then), puts each message it lists that no
ack cleared into the group's pop retry topic, one reconsume more, 1ST_POP_TIME set; with
popReviveDlqEnable, a message delivered retryMaxTimes + 1 times goes to %DLQ%group instead.

The revive offset committed is just before the first CK still waiting (or the end read), so a
restart, ours or a RocketMQ 5 broker's, reads every waiting CK and its acks again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from sidewinder.broker.pop.context import PopContext, now_ms
from sidewinder.broker.pop.records import Ack, CheckPoint
from sidewinder.broker.topics import DLQ_GROUP_TOPIC_PREFIX
from sidewinder.common.service import cancel_and_wait
from sidewinder.protocol.message import MessageConst
from sidewinder.protocol.pop import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    PROPERTY_FIRST_POP_TIME,
    RETRY_GROUP_TOPIC_PREFIX,
    REVIVE_GROUP,
    normal_topic,
)
from sidewinder.protocol.record import MessageRecord, decode_record, message_from_record

log = structlog.get_logger(__name__)
READ_CHUNK = 32
MARGIN_MS = 200  # after a CK's revive time, for acks sent right at it to be dispatched


@dataclass
class _Queue:
    queue_id: int
    next_offset: int
    committed: int
    pending: dict[str, CheckPoint] = field(default_factory=dict)


class ReviveService:
    def __init__(
        self,
        pop: PopContext,
        delivered_before_ms: Callable[[], int],
        *,
        interval_ms: int | None = None,
    ) -> None:
        self.pop = pop
        self.delivered_before_ms = delivered_before_ms  # the timer's progress
        self.interval_s = (interval_ms or min(pop.config.revive_interval, 200)) / 1000
        self._queues: list[_Queue] = []
        self._task: asyncio.Task[None] | None = None
        self.revived = 0
        self.dead = 0

    def load(self) -> None:
        topic = self.pop.revive_topic
        self._queues = []
        for qid in range(self.pop.config.revive_queue_num):
            committed = self.pop.offsets.query(REVIVE_GROUP, topic, qid)
            self._queues.append(_Queue(qid, committed + 1, committed))

    def start(self) -> None:
        self.load()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="pop-revive")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.revive_once()
            except Exception as exc:
                log.error("pop.revive_failed", error=repr(exc), exc_info=exc)

    async def revive_once(self) -> None:
        # Every ack stored so far is dispatched, into the timer topic too; then the timer's
        # progress (which counts only what it has enqueued); then what it put by then is
        # dispatched and read below. Read after the reading, the progress could count an ack
        # this round never saw, and revive a message that was acknowledged.
        await self.pop.store.caught_up()
        delivered = self.delivered_before_ms()
        await self.pop.store.caught_up()
        for queue in self._queues:
            self._read(queue)
            await self._revive_due(queue, delivered)
            self._commit(queue)

    # -- reading the revive queue ----------------------------------------------------------------
    def _read(self, queue: _Queue) -> None:
        store, topic = self.pop.store, self.pop.revive_topic
        while True:
            got = store.get_messages(topic, queue.queue_id, queue.next_offset, READ_CHUNK)
            if not got.messages:
                if got.next_begin_offset > queue.next_offset:  # gone from the store: skip on
                    queue.next_offset = got.next_begin_offset
                    continue
                return
            for view in got.messages:
                record = decode_record(view)
                if isinstance(record, MessageRecord):
                    self._take(queue, record)
            queue.next_offset = got.next_begin_offset

    def _take(self, queue: _Queue, record: MessageRecord) -> None:
        props = record.properties()
        tag = props.get(MessageConst.TAGS)
        body = bytes(record.body)
        try:
            if tag == CK_TAG:
                ck = CheckPoint.from_json(body)
                ck.revive_offset = record.queue_offset
                queue.pending[ck.merge_key] = ck
            elif tag in (ACK_TAG, BATCH_ACK_TAG):
                ack = Ack.from_json(body, batch=tag == BATCH_ACK_TAG)
                key = ack.merge_key if ack.broker_name else _with_broker(ack, self.pop)
                found = queue.pending.get(key)
                if found is None:
                    return  # its CK was revived already, or never was (a made-up handle)
                for offset in ack.acked_offsets():
                    index = found.index_of(offset)
                    if index >= 0:
                        found.bitmap |= 1 << index
        except (ValueError, KeyError, TypeError) as exc:
            log.error("pop.revive_record_unreadable", offset=record.queue_offset, error=str(exc))

    # -- reviving --------------------------------------------------------------------------------
    async def _revive_due(self, queue: _Queue, delivered: int) -> None:
        if not queue.pending:
            return
        now = now_ms()
        # In the order read, which is the revive queue's: the timer puts each CK a second
        # before its revive time, so the first not due ends the round (as RocketMQ's does).
        while queue.pending:
            key, ck = next(iter(queue.pending.items()))
            if ck.revive_time + MARGIN_MS > now or ck.revive_time >= delivered:
                break
            await self._revive(ck)
            del queue.pending[key]

    async def _revive(self, ck: CheckPoint) -> None:
        pop = self.pop
        if pop.topics.get(normal_topic(ck.topic, ck.group)) is None:
            log.warning("pop.revive_topic_gone", topic=ck.topic, group=ck.group)
            return
        group = pop.groups.groups.get(ck.group)
        if group is None:
            log.warning("pop.revive_group_gone", topic=ck.topic, group=ck.group)
            return
        for index in range(ck.num):
            if ck.acked(index):
                continue
            offset = ck.offset_at(index)
            got = pop.store.get_messages(ck.topic, ck.queue_id, offset, 1)
            record = decode_record(got.messages[0]) if got.messages else None
            if not isinstance(record, MessageRecord) or record.queue_offset != offset:
                log.warning("pop.revive_message_gone", topic=ck.topic, offset=offset)
                continue
            if pop.config.pop_revive_dlq_enable and record.reconsume_times >= group.retry_max_times:
                await self._to_dlq(ck, record)
            else:
                await self._to_retry(ck, record)

    async def _to_retry(self, ck: CheckPoint, record: MessageRecord) -> None:
        pop = self.pop
        if ck.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            topic = ck.topic
        else:
            topic = pop.retry_topic(ck.topic, ck.group)
        pop.ensure_retry_topic(topic, ck.group)
        props = record.properties()
        if record.reconsume_times == 0 or PROPERTY_FIRST_POP_TIME not in props:
            props[PROPERTY_FIRST_POP_TIME] = str(ck.pop_time)
        message = message_from_record(
            record,
            topic=topic,
            queue_id=0,
            properties=props,
            born_host=pop.store_host,
            store_host=pop.store_host,
            reconsume_times=record.reconsume_times + 1,
            prepared_transaction_offset=0,
        )
        if await pop.put(message):
            self.revived += 1

    async def _to_dlq(self, ck: CheckPoint, record: MessageRecord) -> None:
        pop = self.pop
        dlq = pop.topics.create_dlq_topic(ck.group)
        props = record.properties()
        props.setdefault(MessageConst.RETRY_TOPIC, normal_topic(ck.topic, ck.group))
        message = message_from_record(
            record,
            topic=dlq.topic_name,
            queue_id=0,
            properties=props,
            reconsume_times=record.reconsume_times + 1,
            prepared_transaction_offset=0,
        )
        if await pop.put(message):
            self.dead += 1
            log.info("pop.to_dlq", topic=ck.topic, group=ck.group, dlq=DLQ_GROUP_TOPIC_PREFIX)

    def _commit(self, queue: _Queue) -> None:
        if queue.pending:
            mark = next(iter(queue.pending.values())).revive_offset - 1
        else:
            mark = queue.next_offset - 1
        if mark > queue.committed:
            queue.committed = mark
            self.pop.offsets.commit(REVIVE_GROUP, self.pop.revive_topic, queue.queue_id, mark)


def _with_broker(ack: Ack, pop: PopContext) -> str:
    """An ack without a broker name matches this broker's CKs (as RocketMQ reads it)."""
    ack.broker_name = pop.config.broker_name
    return ack.merge_key

"""POP_MESSAGE (200050): take up to maxMsgNums messages for a group from one queue or all of a
topic's queues (queueId -1, from a random one on) and, now and then first, from the group's
retry topic; advance the group's consumer offsets past them and write one checkpoint (CK) per
queue read, so each comes back unless acked within invisibleTime.

The answer is RocketMQ 5.3.2's: records as stored (a retry-topic message re-encoded under its
original topic with its handle in POP_CK), popTime, invisibleTime, reviveQid, restNum and the
startOffsetInfo / msgOffsetInfo the client builds each message's handle from. Nothing found:
held up to pollTime (pop/polling.py), then POLLING_TIMEOUT; too many held: POLLING_FULL.
"""

from __future__ import annotations

import itertools
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from sidewinder.broker.config import PERM_READ
from sidewinder.broker.pop.context import PopContext, now_ms
from sidewinder.broker.pop.polling import Hold, PopHolds
from sidewinder.broker.pop.records import CheckPoint
from sidewinder.broker.processors.pull import compiled
from sidewinder.broker.sql_filter import Predicate, SqlFilterError
from sidewinder.broker.topics import TopicConfig
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import (
    NoPermission,
    SidewinderError,
    SubscriptionGroupNotExist,
    SubscriptionParseFailed,
    TopicNotExist,
)
from sidewinder.protocol.pop import (
    INVALID_PARAMETER,
    MAX_POP_MESSAGES,
    ORDER_REVIVE_QID,
    POLLING_FULL,
    POLLING_TIMEOUT,
    PROPERTY_POP_CK,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    QueueKey,
    format_msg_offsets,
    format_start_offsets,
    polling_key,
    pop_retry_topic,
    retry_flag,
)
from sidewinder.protocol.record import (
    QUEUE_OFFSET_POSITION,
    MessageRecord,
    decode_record,
    encode_record,
    message_from_record,
)
from sidewinder.protocol.subscription import parse_tag_expression
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.store.message_store import GetResult, GetStatus

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
BORN_TIME = "bornTime"
TIMEOUT_SLACK_MS = 500  # PopMessageRequestHeader.isTimeoutTooMuch
INIT_MODE_MIN = 0  # ConsumeInitMode.MIN
_QUEUE_OFFSET = struct.Struct(f">{QUEUE_OFFSET_POSITION}xq")  # a stored record's QUEUEOFFSET
_RESET = (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY)
_SKIPPED = (
    GetStatus.NO_MATCHED_MESSAGE,
    GetStatus.MESSAGE_WAS_REMOVING,
    GetStatus.NO_MATCHED_LOGIC_QUEUE,
)


@dataclass
class _Filter:
    codes: frozenset[int] | None = None
    record: Callable[[memoryview], bool] | None = None


@dataclass
class _Popped:
    """What one pop took, across queues."""

    pop_time: int
    revive_qid: int
    header: PopMessageRequestHeader
    records: list[bytes | memoryview] = field(default_factory=list)
    start_offsets: dict[QueueKey, int] = field(default_factory=dict)
    msg_offsets: dict[QueueKey, list[int]] = field(default_factory=dict)
    # Each queue's checkpoint, the records it covers (a slice of `records`) and where the
    # group's offset went.
    checkpoints: list[tuple[CheckPoint, slice, int]] = field(default_factory=list)
    order_counts: list[str] = field(default_factory=list)
    rest: int = 0
    unstored: int = 0  # checkpoints the store refused: their messages were not handed out

    @property
    def room(self) -> int:
        return self.header.max_msg_nums - len(self.records)


class PopMessageProcessor:
    def __init__(self, pop: PopContext, holds: PopHolds) -> None:
        self.pop = pop
        self.holds = holds
        self._ck_numbers = itertools.count()
        self._random = random.Random()

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        if ext is None:
            ext = request.ext_fields = {}
        if ext.get(BORN_TIME) in (None, "0"):  # RocketMQ fills a missing or zero born time
            ext[BORN_TIME] = str(now_ms())
        header = PopMessageRequestHeader.from_ext(ext)
        config = self.pop.config
        if now_ms() - header.born_time - header.poll_time > TIMEOUT_SLACK_MS:
            return request.reply(
                POLLING_TIMEOUT, f"the broker[{config.broker_ip1}] pop message is timeout too much"
            )
        topic, record_filter = self._check(header)
        while True:
            popped = await self._pop(header, topic, record_filter)
            if popped.records:
                return self._answer(request, popped, ResponseCode.SUCCESS, "FOUND")
            if popped.unstored:
                # Ours: RocketMQ stores a check point after its answer; one that cannot be
                # stored before it is a refusal, not an empty queue.
                why = self.pop.store.write_failure() or "the store refused it"
                return request.reply(
                    ResponseCode.SERVICE_NOT_AVAILABLE,
                    f"the pop's check point could not be stored ({why}); nothing was taken",
                )
            if header.poll_time <= 0:
                return self._answer(request, popped, POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE")
            watched = [
                header.topic,
                pop_retry_topic(header.topic, header.consumer_group),
                pop_retry_topic(header.topic, header.consumer_group, v2=True),
            ]
            key = polling_key(header.topic, header.consumer_group, header.queue_id)
            expires = header.born_time + header.poll_time
            held, woken = self.holds.hold(key, watched, expires, now_ms())
            if held is Hold.FULL:
                return self._answer(request, popped, POLLING_FULL, "NO_MESSAGE_IN_QUEUE")
            if held is Hold.TIMEOUT or woken is None:
                return self._answer(request, popped, POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE")
            await woken

    # -- checks ----------------------------------------------------------------------------------
    def _check(self, header: PopMessageRequestHeader) -> tuple[TopicConfig, _Filter]:
        config = self.pop.config
        ip = config.broker_ip1
        if not config.broker_permission & PERM_READ:
            raise NoPermission(f"the broker[{ip}] pop message is forbidden")
        if header.max_msg_nums > MAX_POP_MESSAGES:
            raise SidewinderError(
                f"the broker[{ip}] pop message's num is greater than 32", INVALID_PARAMETER
            )
        # Ours: RocketMQ pops nothing for 0 and takes a negative count or invisible time.
        if header.max_msg_nums <= 0:
            raise SidewinderError(
                f"maxMsgNums {header.max_msg_nums} is not positive", INVALID_PARAMETER
            )
        if header.invisible_time <= 0:
            raise SidewinderError(
                f"invisibleTime {header.invisible_time} is not positive", INVALID_PARAMETER
            )
        if not config.timer_wheel_enable:
            raise SidewinderError(
                f"the broker[{ip}] pop message is forbidden because timerWheelEnable is false"
            )
        topic = self.pop.topics.get(header.topic)
        if topic is None:
            raise TopicNotExist(f"topic[{header.topic}] not exist, apply first please!{FAQ}")
        if not topic.perm & PERM_READ:
            raise NoPermission(f"the topic[{header.topic}] peeking message is forbidden")
        if header.queue_id >= topic.read_queue_nums or header.queue_id < -1:
            raise SidewinderError(
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                f"topicConfig.readQueueNums:[{topic.read_queue_nums}] "
                f"consumer:[{header.consumer_group}]",
                INVALID_PARAMETER,
            )
        group = self.pop.groups.find(header.consumer_group)
        if group is None:
            raise SubscriptionGroupNotExist(
                f"subscription group [{header.consumer_group}] does not exist, {FAQ.strip()}"
            )
        if not group.consume_enable:
            raise NoPermission(f"subscription group no permission, {header.consumer_group}")
        return topic, self._filter(header)

    def _filter(self, header: PopMessageRequestHeader) -> _Filter:
        if not header.exp:
            return _Filter()
        kind = (header.exp_type or "TAG").upper()
        if kind == "TAG":
            return _Filter(codes=parse_tag_expression(header.exp)[1])
        if kind != "SQL92" or not self.pop.config.enable_property_filter:
            raise SubscriptionParseFailed("parse the consumer's subscription failed")
        try:
            predicate = compiled(header.exp)
        except SqlFilterError:
            raise SubscriptionParseFailed("parse the consumer's subscription failed") from None
        return _Filter(record=_matches(predicate))

    # -- popping ---------------------------------------------------------------------------------
    async def _pop(
        self, header: PopMessageRequestHeader, topic: TopicConfig, record_filter: _Filter
    ) -> _Popped:
        config = self.pop.config
        await self.pop.store.caught_up()  # what was sent before the pop is in the queues
        random_q = self._random.randrange(100)
        if header.order:
            revive_qid = ORDER_REVIVE_QID
        else:
            revive_qid = next(self._ck_numbers) % config.revive_queue_num
        popped = _Popped(now_ms(), revive_qid, header)
        need_retry = random_q < config.pop_from_retry_probability and not header.order
        retry_v1 = (
            config.enable_retry_topic_v2
            and config.retrieve_message_from_pop_retry_topic_v1
            and random_q % 2 == 0
        )
        retry = (
            pop_retry_topic(header.topic, header.consumer_group)
            if retry_v1
            else self.pop.retry_topic(header.topic, header.consumer_group)
        )
        if need_retry:
            self._pop_topic(retry, True, popped, random_q, _Filter())
        if header.queue_id < 0:
            self._pop_topic(topic.topic_name, False, popped, random_q, record_filter)
        else:
            self._pop_queue(topic.topic_name, header.queue_id, False, popped, record_filter)
        if not need_retry and popped.room > 0 and not header.order:
            self._pop_topic(retry, True, popped, random_q, _Filter())
        failed: list[slice] = []
        for ck, covered, moved_to in popped.checkpoints:
            # Stored (on disk under SYNC_FLUSH) before the answer: a message handed out is
            # one the revive service will bring back. One that could not be stored is not
            # handed out, and the group's offset goes back (unless a pop since moved it on).
            if await self.pop.write_ck(ck, revive_qid):
                continue
            failed.append(covered)
            popped.unstored += 1
            key = (retry_flag(ck.topic), ck.queue_id)
            popped.start_offsets.pop(key, None)
            popped.msg_offsets.pop(key, None)
            offsets = self.pop.offsets
            if offsets.query(ck.group, ck.topic, ck.queue_id) == moved_to:
                offsets.commit(ck.group, ck.topic, ck.queue_id, ck.start_offset)
        for covered in reversed(failed):
            del popped.records[covered]
        return popped

    def _pop_topic(
        self, name: str, is_retry: bool, popped: _Popped, random_q: int, record_filter: _Filter
    ) -> None:
        topic = self.pop.topics.get(name)
        if topic is None:
            return
        queues = topic.read_queue_nums
        for i in range(queues):
            self._pop_queue(name, (random_q + i) % queues, is_retry, popped, record_filter)

    def _pop_queue(
        self, topic: str, queue_id: int, is_retry: bool, popped: _Popped, record_filter: _Filter
    ) -> None:
        store, offsets = self.pop.store, self.pop.offsets
        group = popped.header.consumer_group
        offset = self._pop_offset(topic, group, queue_id, popped.header.init_mode)
        header = popped.header
        if header.order and self.pop.orders.blocked(
            header.attempt_id, topic, group, queue_id, header.invisible_time
        ):
            return  # its last batch is out: nothing more of this queue until it is done
        if popped.room <= 0:
            popped.rest += max(store.max_offset_in_queue(topic, queue_id) - offset, 0)
            return

        def read(start: int) -> GetResult:
            return store.get_messages(
                topic,
                queue_id,
                start,
                popped.room,
                tags_codes=record_filter.codes,
                record_filter=record_filter.record,
            )

        got = read(offset)
        if got.status in _RESET:
            # The stored offset is off the queue: start again where the store says.
            offset = got.next_begin_offset
            offsets.commit(group, topic, queue_id, offset)
            got = read(offset)
        if got.messages:
            # Read straight from each record: a full decode only where the record is rewritten.
            queue_offsets = [_QUEUE_OFFSET.unpack_from(view)[0] for view in got.messages]
            if header.order:
                self._note_batch(topic, queue_id, offset, queue_offsets, popped)
            else:
                ck = self._checkpoint(topic, queue_id, offset, queue_offsets, popped)
                covered = slice(len(popped.records), len(popped.records) + len(got.messages))
                popped.checkpoints.append((ck, covered, got.next_begin_offset))
                offsets.commit(group, topic, queue_id, got.next_begin_offset)
            popped.start_offsets[(retry_flag(topic), queue_id)] = offset
            popped.msg_offsets[(retry_flag(topic), queue_id)] = queue_offsets
            for view in got.messages:
                record = decode_record(view) if is_retry else None
                if isinstance(record, MessageRecord):
                    popped.records.append(self._as_original(record, offset, popped))
                else:
                    popped.records.append(bytes(view))
        elif got.status in _SKIPPED and got.next_begin_offset > offset:
            offsets.commit(group, topic, queue_id, got.next_begin_offset)
        popped.rest += max(got.max_offset - got.next_begin_offset, 0)

    def _checkpoint(
        self, topic: str, queue_id: int, start: int, queue_offsets: list[int], popped: _Popped
    ) -> CheckPoint:
        return CheckPoint(
            topic=topic,
            group=popped.header.consumer_group,
            queue_id=queue_id,
            start_offset=start,
            pop_time=popped.pop_time,
            invisible_time=popped.header.invisible_time,
            broker_name=self.pop.config.broker_name,
            diffs=[o - start for o in queue_offsets],
        )

    def _note_batch(
        self, topic: str, queue_id: int, start: int, queue_offsets: list[int], popped: _Popped
    ) -> None:
        """An orderly pop: no checkpoint and the offset stays; the batch blocks the queue."""
        header = popped.header
        counts = self.pop.orders.update(
            header.attempt_id,
            topic,
            header.consumer_group,
            queue_id,
            popped.pop_time,
            header.invisible_time,
            queue_offsets,
        )
        kind = retry_flag(topic)
        popped.order_counts += [f"{kind} {key} {n}" for key, n in counts]
        self.pop.offsets.commit(header.consumer_group, topic, queue_id, start)

    def _pop_offset(self, topic: str, group: str, queue_id: int, init_mode: int) -> int:
        """The group's offset, or where a group new to the queue starts (getInitOffset): the
        queue's first message for MIN and retry topics, else its last one (all of a queue that
        still starts at 0)."""
        offsets, store = self.pop.offsets, self.pop.store
        offset = offsets.query(group, topic, queue_id)
        if offset >= 0:
            return offset
        minimum = store.min_offset_in_queue(topic, queue_id)
        if init_mode == INIT_MODE_MIN or topic.startswith("%RETRY%") or minimum <= 0:
            offset = minimum
        else:
            offset = max(store.max_offset_in_queue(topic, queue_id) - 1, 0)
        offsets.commit(group, topic, queue_id, offset)
        return offset

    def _as_original(self, record: MessageRecord, start: int, popped: _Popped) -> bytes:
        """A retry-topic message as the client gets it: under the topic it popped, its handle
        in PROPERTY_POP_CK (the client cannot build it from the offset summaries)."""
        props = record.properties()
        props.setdefault(
            PROPERTY_POP_CK,
            ExtraInfo(
                start,
                popped.pop_time,
                popped.header.invisible_time,
                popped.revive_qid,
                retry_flag(record.topic),
                self.pop.config.broker_name,
                record.queue_id,
                record.queue_offset,
            ).encode(),
        )
        message = message_from_record(
            record, topic=popped.header.topic, queue_id=record.queue_id, properties=props
        )
        buffer = bytearray(message.record_size)
        encode_record(
            message,
            buffer,
            0,
            queue_offset=record.queue_offset,
            phy_offset=record.phy_offset,
            store_timestamp=record.store_timestamp,
        )
        return bytes(buffer)

    # -- the answer ------------------------------------------------------------------------------
    def _answer(
        self, request: RemotingCommand, popped: _Popped, code: int, remark: str
    ) -> RemotingCommand:
        header = PopMessageResponseHeader(
            pop_time=popped.pop_time,
            invisible_time=popped.header.invisible_time,
            revive_qid=ORDER_REVIVE_QID if popped.header.order else popped.revive_qid,
            rest_num=popped.rest,
            start_offset_info=format_start_offsets(popped.start_offsets),
            msg_offset_info=format_msg_offsets(popped.msg_offsets),
            order_count_info=";".join(popped.order_counts) if popped.header.order else None,
        )
        body = b"".join(popped.records) if code == ResponseCode.SUCCESS else None
        return request.reply(code, remark, ext_fields=header.to_ext(), body=body)


def _matches(predicate: Predicate) -> Callable[[memoryview], bool]:
    def matches(view: memoryview) -> bool:
        record = decode_record(view)
        return isinstance(record, MessageRecord) and predicate(record.properties())

    return matches

"""ACK_MESSAGE (200051), BATCH_ACK_MESSAGE (200151) and CHANGE_MESSAGE_INVISIBLETIME (200053).

An ack writes an ACK record (tag "ack", or "bAck" for a batch) into the revive queue its handle
names, due when the message's invisible time runs out: the revive service then finds its CK's
bit set and leaves the message be. A change of invisible time writes a new one-message CK
(popTime now) and acks the old one; the client builds the new handle from the answer.

RocketMQ answers SUCCESS for an ack it cannot match (a made-up, repeated or other group's
handle): clients rely on it, so do we, and log it. A handle that does not parse, a queue the
topic lacks or an invisible time that is not positive is refused with a code and a remark.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import structlog

from sidewinder.broker.pop.context import PopContext, now_ms
from sidewinder.broker.pop.polling import PopHolds
from sidewinder.broker.pop.records import Ack, CheckPoint
from sidewinder.broker.topics import TopicConfig
from sidewinder.protocol.body import loads
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import ONEWAY_FLAG, RemotingCommand
from sidewinder.protocol.errors import BodyError, SidewinderError, TopicNotExist
from sidewinder.protocol.pop import (
    INVALID_PARAMETER,
    ORDER_REVIVE_QID,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ExtraInfo,
    PopRequestCode,
    real_topic,
)
from sidewinder.remoting.codec import encode_frame
from sidewinder.remoting.dispatch import RequestContext, error_reply

log = structlog.get_logger(__name__)
FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


async def _write_ack(
    pop: PopContext, topic: str, group: str, queue_id: int, offset: int, extra: ExtraInfo
) -> None:
    """The ACK record of one message of the check point `extra` names."""
    ack = Ack(
        topic=topic,
        group=group,
        queue_id=queue_id,
        start_offset=extra.ck_queue_offset,
        ack_offset=offset,
        pop_time=extra.pop_time,
        broker_name=extra.broker_name,
    )
    await pop.write_ack(ack, extra.revive_qid, extra.pop_time + extra.invisible_time)


def _extra(text: str) -> ExtraInfo:
    try:
        return ExtraInfo.decode(text)
    except ValueError as exc:
        raise SidewinderError(f"illegal extraInfo: {exc}", INVALID_PARAMETER) from None


class _Checks:
    pop: PopContext

    def _topic(self, name: str, queue_id: int) -> TopicConfig:
        topic = self.pop.topics.get(name)
        if topic is None:
            raise TopicNotExist(f"topic[{name}] not exist, apply first please!{FAQ}")
        if not 0 <= queue_id < topic.read_queue_nums:
            raise SidewinderError(
                f"queueId[{queue_id}] is illegal, topic:[{name}] "
                f"topicConfig.readQueueNums:[{topic.read_queue_nums}]",
                ResponseCode.MESSAGE_ILLEGAL,
            )
        return topic

    def _known_revive_queue(self, extra: ExtraInfo) -> bool:
        return 0 <= extra.revive_qid < self.pop.config.revive_queue_num


def ack_orderly(
    pop: PopContext,
    holds: PopHolds | None,
    topic: str,
    group: str,
    queue_id: int,
    offset: int,
    pop_time: int,
    invisible_time: int,
) -> str | None:
    """Ack one message of an orderly batch (ackOrderly): the group's offset moves to the first
    message of the batch not acked, and held pops are served again once the queue is free.
    A remark when the message is no part of the batch."""
    committed = pop.offsets.query(group, topic, queue_id)
    if offset < committed:
        return None
    following = pop.orders.commit_and_next(topic, group, queue_id, offset, pop_time)
    if following == -1:
        return (
            f"offset is illegal, key:{topic}@{group}@{queue_id}, old:{committed}, "
            f"commit:{offset}, next:{following}"
        )
    if following >= 0:
        pop.offsets.commit(group, topic, queue_id, following)
        free = not pop.orders.blocked(None, topic, group, queue_id, invisible_time)
        if free and holds is not None:
            holds.arrived(topic, queue_id, following)
    return None


# The check point an ack belongs to, as its record names it: topic, group, queueId, the
# check point's start offset, popTime, brokerName, then the revive queue and the record's due time.
AckKey = tuple[str, str, int, int, int, str, int, int]


def _ack_record(key: AckKey, offsets: list[int]) -> Ack:
    """One ACK record for the offsets acked of one check point: a plain "ack" for one, a
    "bAck" (RocketMQ's BatchAckMsg, which its revive service reads as it reads acks) for more."""
    topic, group, queue_id, start, pop_time, broker_name, _, _ = key
    if len(offsets) == 1:
        return Ack(topic, group, queue_id, start, offsets[0], pop_time, broker_name)
    return Ack(topic, group, queue_id, start, -1, pop_time, broker_name, sorted(set(offsets)))


class AckMessageProcessor(_Checks):
    """ACK_MESSAGE one by one (`process`) and by the chunk (`take_batch`): the acks a client
    writes together (RocketMQ 5's clients ack every message of a pop at once) that belong to
    one check point become one record, so a pop of 32 costs one store write for its acks,
    not 32. Each is answered once its record is stored, as RocketMQ answers after its put."""

    def __init__(self, pop: PopContext, holds: PopHolds | None = None) -> None:
        self.pop = pop
        self.holds = holds
        self._writing: set[asyncio.Task[None]] = set()

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if request.code == PopRequestCode.BATCH_ACK_MESSAGE:
            return await self._batch(request)
        checked = self._check(request)
        if isinstance(checked, RemotingCommand):
            return checked
        key, offset = checked
        await self._write({key: [offset]})
        return request.reply(ResponseCode.SUCCESS)

    def take_batch(
        self, ctx: RequestContext, commands: list[RemotingCommand]
    ) -> list[RemotingCommand]:
        """The ACK_MESSAGE requests of one chunk, each checked as `process` checks it; those
        of one check point written as one record, all answered once their records are stored."""
        others: list[RemotingCommand] = []
        refused: list[bytes] = []
        waiting: list[RemotingCommand] = []
        acks: dict[AckKey, list[int]] = {}
        for command in commands:
            if command.code != PopRequestCode.ACK_MESSAGE:
                others.append(command)
                continue
            try:
                checked = self._check(command)
            except Exception as exc:
                checked = error_reply(command, exc)
            if isinstance(checked, RemotingCommand):
                if not command.flag & ONEWAY_FLAG:
                    refused.append(encode_frame(checked))
                continue
            key, offset = checked
            offsets = acks.get(key)
            if offsets is None:
                acks[key] = [offset]
            else:
                offsets.append(offset)
            waiting.append(command)
        if refused:
            ctx.write_frames(refused)
        if waiting:
            task = asyncio.get_running_loop().create_task(self._answer(ctx, acks, waiting))
            self._writing.add(task)
            task.add_done_callback(self._writing.discard)
        return others

    async def _answer(
        self, ctx: RequestContext, acks: dict[AckKey, list[int]], waiting: list[RemotingCommand]
    ) -> None:
        try:
            await self._write(acks)
        except Exception as exc:  # our bug: each ack still gets an answer
            replies = [error_reply(command, exc) for command in waiting]
        else:
            replies = [command.reply(ResponseCode.SUCCESS) for command in waiting]
        frames = [
            encode_frame(reply)
            for command, reply in zip(waiting, replies, strict=True)
            if not command.flag & ONEWAY_FLAG
        ]
        if frames:
            ctx.write_frames(frames)

    async def _write(self, acks: dict[AckKey, list[int]]) -> None:
        """Store the records; a put that fails is logged by the store side and answered
        SUCCESS all the same, as RocketMQ does: the message then comes back when its time
        runs out, never lost."""
        for key, offsets in acks.items():
            await self.pop.write_ack(_ack_record(key, offsets), key[6], key[7])

    def _check(self, request: RemotingCommand) -> RemotingCommand | tuple[AckKey, int]:
        """One ACK_MESSAGE: its answer when it needs no record (a refusal, an orderly ack, a
        handle of no revive queue of ours), else the check point it acks and its offset."""
        header = AckMessageRequestHeader.from_ext(request.ext_fields)
        self._topic(header.topic, header.queue_id)
        store = self.pop.store
        low = store.min_offset_in_queue(header.topic, header.queue_id)
        high = store.max_offset_in_queue(header.topic, header.queue_id)
        if not low <= header.offset <= high:
            return request.reply(
                ResponseCode.NO_MESSAGE,
                f"offset is illegal, key:{header.topic}@{header.queue_id}, "
                f"commit:{header.offset}, store:{low}~{high}",
            )
        extra = _extra(header.extra_info)
        if extra.is_order:
            remark = ack_orderly(
                self.pop,
                self.holds,
                header.topic,
                header.consumer_group,
                header.queue_id,
                header.offset,
                extra.pop_time,
                extra.invisible_time,
            )
            if remark is not None:
                return request.reply(ResponseCode.MESSAGE_ILLEGAL, remark)
            return request.reply(ResponseCode.SUCCESS)
        if not self._known_revive_queue(extra):
            log.warning("pop.ack_unmatched", handle=header.extra_info, group=header.consumer_group)
            return request.reply(ResponseCode.SUCCESS)
        key = (
            header.topic,
            header.consumer_group,
            header.queue_id,
            extra.ck_queue_offset,
            extra.pop_time,
            extra.broker_name,
            extra.revive_qid,
            extra.pop_time + extra.invisible_time,
        )
        return key, header.offset

    async def _batch(self, request: RemotingCommand) -> RemotingCommand:
        acks = _batch_body(request.body)
        if not acks:
            return request.reply(ResponseCode.NO_MESSAGE)
        store = self.pop.store
        broker_name = str(acks[0].get("_broker") or "")
        refused: str | None = None
        for one in acks:
            try:
                group, kind = str(one["c"]), str(one.get("r", "0"))
                topic = real_topic(str(one["t"]), group, kind)
                queue_id, revive_qid = int(one["q"]), int(one["rq"])
                start, pop_time, invisible = int(one["so"]), int(one["pt"]), int(one["it"])
                bits = _bits(one.get("b"))
            except (KeyError, TypeError, ValueError) as exc:
                raise SidewinderError(
                    f"illegal batch ack {one!r}: {exc}", INVALID_PARAMETER
                ) from None
            low = store.min_offset_in_queue(topic, queue_id)
            high = store.max_offset_in_queue(topic, queue_id)
            offsets = [start + i for i in bits if low <= start + i <= high]
            if revive_qid == ORDER_REVIVE_QID:
                for offset in offsets:
                    remark = ack_orderly(
                        self.pop, self.holds, topic, group, queue_id, offset, pop_time, invisible
                    )
                    if remark is not None:
                        refused = remark
                continue
            if not 0 <= revive_qid < self.pop.config.revive_queue_num:
                log.warning("pop.batch_ack_unmatched", ack=one)
                continue
            if not offsets:
                continue
            ack = Ack(topic, group, queue_id, start, -1, pop_time, broker_name, offsets)
            await self.pop.write_ack(ack, revive_qid, pop_time + invisible)
        if refused is not None:
            return request.reply(ResponseCode.MESSAGE_ILLEGAL, refused)
        return request.reply(ResponseCode.SUCCESS)


def _batch_body(body: bytes | bytearray | memoryview | None) -> list[dict[str, Any]]:
    """BatchAckMessageRequestBody: {"acks": [BatchAck...], "brokerName": ...}."""
    if not body:
        return []
    value = loads(bytes(body))  # BodyError for what is not JSON
    acks = value.get("acks") if isinstance(value, dict) else None
    if acks is None:
        acks = []
    if not isinstance(acks, list) or not all(isinstance(a, dict) for a in acks):
        raise BodyError("batch ack body's acks is not a list of objects")
    for one in acks:
        one["_broker"] = value.get("brokerName")
    return acks


def _bits(raw: Any) -> list[int]:
    """The set bits of a java.util.BitSet fastjson wrote as a byte array (base64)."""
    if raw is None:
        return []
    data = base64.b64decode(raw) if isinstance(raw, str) else bytes(raw)
    return [i for i in range(len(data) * 8) if data[i // 8] >> (i % 8) & 1]


class ChangeInvisibleTimeProcessor(_Checks):
    def __init__(self, pop: PopContext) -> None:
        self.pop = pop

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = ChangeInvisibleTimeRequestHeader.from_ext(request.ext_fields)
        self._topic(header.topic, header.queue_id)
        store = self.pop.store
        low = store.min_offset_in_queue(header.topic, header.queue_id)
        high = store.max_offset_in_queue(header.topic, header.queue_id)
        if not low <= header.offset < high:
            return request.reply(ResponseCode.NO_MESSAGE)
        extra = _extra(header.extra_info)
        if header.invisible_time < 0:  # ours: RocketMQ takes it too, and revives at once
            raise SidewinderError(
                f"invisibleTime {header.invisible_time} is negative", INVALID_PARAMETER
            )
        if extra.is_order:
            return self._change_orderly(request, header, extra)
        if not self._known_revive_queue(extra):
            raise SidewinderError(
                f"the handle's revive queue {extra.revive_qid} is not one of this broker's",
                INVALID_PARAMETER,
            )
        now = now_ms()
        ck = CheckPoint(
            topic=header.topic,
            group=header.consumer_group,
            queue_id=header.queue_id,
            start_offset=header.offset,
            pop_time=now,
            invisible_time=header.invisible_time,
            broker_name=extra.broker_name,
            diffs=[0],
        )
        if not await self.pop.write_ck(ck, extra.revive_qid):
            return request.reply(ResponseCode.SYSTEM_ERROR, "the new checkpoint was not stored")
        await _write_ack(
            self.pop, header.topic, header.consumer_group, header.queue_id, header.offset, extra
        )
        answer = ChangeInvisibleTimeResponseHeader(now, header.invisible_time, extra.revive_qid)
        return request.reply(ResponseCode.SUCCESS, ext_fields=answer.to_ext())

    def _change_orderly(
        self, request: RemotingCommand, header: ChangeInvisibleTimeRequestHeader, extra: ExtraInfo
    ) -> RemotingCommand:
        """An orderly batch's message: only its own visible time moves; the handle keeps the
        batch's popTime, with the invisible time counted from it."""
        group, topic, queue_id = header.consumer_group, header.topic, header.queue_id
        if header.offset < self.pop.offsets.query(group, topic, queue_id):
            answer = ChangeInvisibleTimeResponseHeader(0, 0, 0)  # acked already
            return request.reply(ResponseCode.SUCCESS, ext_fields=answer.to_ext())
        visible = now_ms() + header.invisible_time
        self.pop.orders.update_next_visible(
            topic, group, queue_id, header.offset, extra.pop_time, visible
        )
        answer = ChangeInvisibleTimeResponseHeader(
            extra.pop_time, visible - extra.pop_time, extra.revive_qid
        )
        return request.reply(ResponseCode.SUCCESS, ext_fields=answer.to_ext())

"""Raw POP requests as RocketMQ 5.3.2's remoting client builds them, and its reading of the
answers (MQClientAPIImpl.processPopResponse): each message's handle is its POP_CK property, or
built from the answer's startOffsetInfo and msgOffsetInfo.

    reply = client.invoke(addr, pop_request(topic, group, invisible_ms=2000), 10)
    for msg in popped(reply, topic, broker_name):
        client.invoke(addr, ack_request(msg, group), 5)
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.pop import (
    PROPERTY_POP_CK,
    ExtraInfo,
    PopMessageRequestHeader,
    PopRequestCode,
    parse_msg_offsets,
    parse_start_offsets,
    retry_flag,
)
from sidewinder.protocol.record import MessageRecord, decode_record

INIT_MODE_MIN = 0


def pop_request(
    topic: str,
    group: str,
    *,
    queue_id: int = -1,
    max_msg_nums: int = 32,
    invisible_ms: int = 3000,
    poll_ms: int = 0,
    born_ms: int | None = None,
    exp: str | None = None,
    exp_type: str | None = None,
    init_mode: int = INIT_MODE_MIN,
    **fields: Any,
) -> RemotingCommand:
    header = PopMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=queue_id,
        max_msg_nums=max_msg_nums,
        invisible_time=invisible_ms,
        poll_time=poll_ms,
        born_time=int(time.time() * 1000) if born_ms is None else born_ms,
        init_mode=init_mode,
        exp_type=exp_type,
        exp=exp,
        **fields,
    )
    return RemotingCommand.request(PopRequestCode.POP_MESSAGE, header.to_ext())


@dataclass
class Popped:
    record: MessageRecord
    handle: str
    properties: dict[str, str]

    @property
    def body(self) -> bytes:
        return bytes(self.record.body)

    @property
    def extra(self) -> ExtraInfo:
        return ExtraInfo.decode(self.handle)


def popped(reply: RemotingCommand, topic: str, broker_name: str) -> list[Popped]:
    """The messages of a pop's answer, each with the handle the client acks it by."""
    if reply.code != ResponseCode.SUCCESS:
        return []
    ext = reply.ext_fields or {}
    starts = parse_start_offsets(ext.get("startOffsetInfo"))
    offsets = parse_msg_offsets(ext.get("msgOffsetInfo"))
    out = []
    data, at = bytes(reply.body or b""), 0
    while at < len(data):
        record = decode_record(data, at)
        assert isinstance(record, MessageRecord), record
        at += record.total_size
        props = record.properties()
        handle = props.get(PROPERTY_POP_CK)
        if handle is None:
            key = (retry_flag(record.topic), record.queue_id)
            assert record.queue_offset in offsets[key], (record.queue_offset, offsets)
            handle = ExtraInfo(
                starts[key],
                int(ext["popTime"]),
                int(ext["invisibleTime"]),
                int(ext["reviveQid"]),
                retry_flag(record.topic),
                broker_name,
                record.queue_id,
                record.queue_offset,
            ).encode()
        out.append(Popped(record, handle, props))
    return out


def _target(msg: Popped, topic: str, group: str) -> dict[str, str]:
    extra = msg.extra
    return {
        "consumerGroup": group,
        "topic": extra.real_topic(topic, group),
        "queueId": str(extra.queue_id),
        "extraInfo": msg.handle,
        "offset": str(extra.queue_offset),
    }


def ack_request(msg: Popped, topic: str, group: str) -> RemotingCommand:
    return RemotingCommand.request(PopRequestCode.ACK_MESSAGE, _target(msg, topic, group))


def change_invisible_request(
    msg: Popped, topic: str, group: str, invisible_ms: int
) -> RemotingCommand:
    fields = _target(msg, topic, group) | {"invisibleTime": str(invisible_ms)}
    return RemotingCommand.request(PopRequestCode.CHANGE_MESSAGE_INVISIBLETIME, fields)


def changed_handle(reply: RemotingCommand, msg: Popped) -> str:
    """The new handle after a change of invisible time, as the client builds it."""
    ext = reply.ext_fields or {}
    old = msg.extra
    return ExtraInfo(
        old.queue_offset,
        int(ext["popTime"]),
        int(ext["invisibleTime"]),
        int(ext["reviveQid"]),
        old.retry,
        old.broker_name,
        old.queue_id,
        old.queue_offset,
    ).encode()


def create_topic_request(
    topic: str, queues: int = 2, message_type: str | None = None
) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC; `message_type` sets RocketMQ 5's `message.type` attribute."""
    fields = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": str(queues),
        "writeQueueNums": str(queues),
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }
    if message_type is not None:
        fields["attributes"] = f"+message.type={message_type}"
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)


def create_group_request(
    group: str, retry_max_times: int = 16, *, orderly: bool = False
) -> RemotingCommand:
    """`orderly`: RocketMQ 5's consumeMessageOrderly (a FIFO group for 5.x clients)."""
    value = {
        "groupName": group,
        "consumeEnable": True,
        "consumeBroadcastEnable": True,
        "retryQueueNums": 1,
        "retryMaxTimes": retry_max_times,
        "brokerId": 0,
        "whichBrokerWhenConsumeSlowly": 1,
        "notifyConsumerIdsChangedEnable": True,
    }
    if orderly:
        value["consumeMessageOrderly"] = True
    body = json.dumps(value)
    return RemotingCommand.request(
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body=body.encode()
    )


def create_topic_and_group(broker_addr: str, topic: str, group: str, queues: int = 1) -> None:
    """A topic of `queues` queues and a group on the broker at `broker_addr`, over remoting."""
    from sidewinder.remoting.client import SyncRemotingClient

    client = SyncRemotingClient()
    try:
        for request in (create_topic_request(topic, queues), create_group_request(group)):
            reply = client.invoke(broker_addr, request, 10)
            assert reply.code == ResponseCode.SUCCESS, reply
    finally:
        client.close()


def query_offset_request(topic: str, group: str, queue_id: int) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)},
    )

"""What a consumer answers when a broker calls it for mqadmin, as the Java client's
ClientRemotingProcessor and MQClientInstance do. A push consumer (`ConsumerCalls`):
RESET_CONSUMER_CLIENT_OFFSET (220, oneway: drop the queues, store the new offsets, rebalance),
GET_CONSUMER_STATUS_FROM_CLIENT (221: its offsets), GET_CONSUMER_RUNNING_INFO (307:
ConsumerRunningInfo) and CONSUME_MESSAGE_DIRECTLY (309: run the listener on one message and say
how it went). A lite pull consumer (`PullConsumerCalls`) answers as DefaultLitePullConsumer:
220 changes nothing, 221 an empty table, 307 its settings and subscriptions, 309 a refusal.

    consumer.member.table.register(ConsumerCalls(consumer), *CONSUMER_CALL_CODES)
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

from sidewinder.client.membership import CONSUME_FROM, GroupMember
from sidewinder.client.pulling import ReceivedMessage
from sidewinder.client.route_cache import MessageQueue
from sidewinder.common.log import library_logger
from sidewinder.protocol import body
from sidewinder.protocol.client_calls import (
    ConsumeMessageDirectlyRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    QueueKey,
    ResetOffsetRequestHeader,
    consumer_status_body,
    parse_offset_table,
)
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.record import MessageRecord, decode_record
from sidewinder.remoting.dispatch import RequestContext

if TYPE_CHECKING:
    from sidewinder.client.consumer import PullConsumer
    from sidewinder.client.push_consumer import PushConsumer

log = library_logger(__name__)

CONSUMER_CALL_CODES = (
    RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
    RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
    RequestCode.GET_CONSUMER_RUNNING_INFO,
    RequestCode.CONSUME_MESSAGE_DIRECTLY,
)
CLIENT_VERSION_DESC = "V4_9_8"  # what our heartbeats' version number stands for


def _key(queue: MessageQueue) -> QueueKey:
    return QueueKey(queue.topic, queue.broker_name, queue.queue_id)


def _not_ours(request: RemotingCommand, group: str) -> RemotingCommand:
    """MQClientInstance's answer when it has no such consumer (307, 309)."""
    return request.reply(
        ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer"
    )


def _client_properties(member: GroupMember, started_ms: int) -> dict[str, str]:
    """What MQClientInstance.consumerRunningInfo adds to any consumer's properties."""
    return {
        "PROP_NAMESERVER_ADDR": "".join(f"{a};" for a in member.routes.namesrv_addrs),
        "PROP_CONSUME_TYPE": member.consume_type,
        "PROP_CLIENT_VERSION": CLIENT_VERSION_DESC,
        "PROP_CONSUMER_START_TIMESTAMP": str(started_ms),
    }


class _Calls:
    """The four calls routed to a consumer's answers; running info for its group only."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.started_ms = int(time.time() * 1000)

    async def process(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        code = request.code
        if code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            await self._reset_offset(request)
            return None  # the broker sends it oneway; Java answers nothing either
        if code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:
            return self._status(request)
        if code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            header = GetConsumerRunningInfoRequestHeader.from_ext(request.ext_fields)
            if header.consumer_group != self.group:
                return _not_ours(request, header.consumer_group)
            info = self.running_info()
            if header.jstack_enable:
                info["jstack"] = _thread_stacks()
            return request.reply(ResponseCode.SUCCESS, body=body.dumps(info).encode())
        return await self._consume_directly(request)

    async def _reset_offset(self, request: RemotingCommand) -> None:
        raise NotImplementedError

    def _status(self, request: RemotingCommand) -> RemotingCommand:
        raise NotImplementedError

    def running_info(self) -> dict[str, Any]:
        """ConsumerRunningInfo, less the jstack."""
        raise NotImplementedError

    async def _consume_directly(self, request: RemotingCommand) -> RemotingCommand:
        raise NotImplementedError


class ConsumerCalls(_Calls):
    def __init__(self, consumer: PushConsumer) -> None:
        super().__init__(consumer.group)
        self.consumer = consumer

    # -- 220 --------------------------------------------------------------------------------------
    async def _reset_offset(self, request: RemotingCommand) -> None:
        header = ResetOffsetRequestHeader.from_ext(request.ext_fields)
        if header.group != self.consumer.group:
            log.info("client.reset_offset_other_group", group=header.group)
            return
        table = parse_offset_table(request.body_bytes)
        offsets = {
            queue: table[_key(queue)]
            for queue in self.consumer.process_queues
            if queue.topic == header.topic and _key(queue) in table
        }
        log.info("client.reset_offset", group=header.group, topic=header.topic, queues=len(offsets))
        await self.consumer.reset_offsets(offsets)

    # -- 221 --------------------------------------------------------------------------------------
    def _status(self, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumerStatusRequestHeader.from_ext(request.ext_fields)
        table: dict[QueueKey, int] = {}
        if header.group == self.consumer.group:
            table = {_key(q): o for q, o in self.consumer.offset_table(header.topic).items()}
        return request.reply(ResponseCode.SUCCESS, body=consumer_status_body(queue_table=table))

    # -- 307 --------------------------------------------------------------------------------------
    def running_info(self) -> dict[str, Any]:
        """ConsumerRunningInfo as DefaultMQPushConsumerImpl and MQClientInstance fill it."""
        consumer = self.consumer
        member = consumer.member
        properties = {
            "consumerGroup": consumer.group,
            "messageModel": member.message_model,
            "consumeFromWhere": CONSUME_FROM.get(member.consume_from, member.consume_from),
            "consumeThreadMin": str(consumer.consume_concurrency),
            "consumeThreadMax": str(consumer.consume_concurrency),
            "consumeMessageBatchMaxSize": str(consumer.batch_size),
            "pullBatchSize": str(consumer.pull_batch_size),
            "pullThresholdForQueue": str(consumer.pull_threshold_per_queue),
            "maxReconsumeTimes": str(consumer.max_reconsume_times),
            "persistConsumerOffsetInterval": str(int(consumer.persist_interval_s * 1000)),
            "heartbeatBrokerInterval": str(int(consumer.heartbeat_interval_s * 1000)),
            "instanceName": member.client_id.split("@", 1)[-1],
            **_client_properties(member, self.started_ms),
            "PROP_CONSUMEORDERLY": "false",
            "PROP_THREADPOOL_CORE_SIZE": str(consumer.consume_concurrency),
        }
        mq_table = {}
        for queue, pq in sorted(consumer.process_queues.items()):
            cached = sorted(pq.in_flight)
            mq_table[_key(queue).object_key()] = {
                "cachedMsgCount": len(cached),
                "cachedMsgMaxOffset": cached[-1] if cached else 0,
                "cachedMsgMinOffset": cached[0] if cached else 0,
                "cachedMsgSizeInMiB": sum(len(m.body) for m in pq.in_flight.values()) >> 20,
                "commitOffset": max(pq.consumed_up_to(), 0),
                "droped": pq.dropped,
                "lastConsumeTimestamp": pq.last_consume_ms,
                "lastLockTimestamp": 0,
                "lastPullTimestamp": pq.last_pull_ms,
                "locked": False,
                "transactionMsgCount": 0,
                "transactionMsgMaxOffset": 0,
                "transactionMsgMinOffset": 0,
                "tryUnlockTimes": 0,
            }
        zero = {
            "consumeFailedMsgs": 0,
            "consumeFailedTPS": 0.0,
            "consumeOKTPS": 0.0,
            "consumeRT": 0.0,
            "pullRT": 0.0,
            "pullTPS": 0.0,
        }
        info: dict[str, Any] = {
            "mqTable": mq_table,
            "properties": properties,
            "statusTable": {topic: dict(zero) for topic in sorted(member.subscriptions)},
            "subscriptionSet": [s.to_json() for _, s in sorted(member.subscriptions.items())],
        }
        return info

    # -- 309 --------------------------------------------------------------------------------------
    async def _consume_directly(self, request: RemotingCommand) -> RemotingCommand:
        header = ConsumeMessageDirectlyRequestHeader.from_ext(request.ext_fields)
        if header.consumer_group != self.consumer.group:
            return _not_ours(request, header.consumer_group)
        record = decode_record(request.body_bytes, 0) if request.body else None
        if not isinstance(record, MessageRecord):
            return request.reply(ResponseCode.SYSTEM_ERROR, "the body is not a stored message")
        queue = MessageQueue(record.topic, header.broker_name or "", record.queue_id)
        message = ReceivedMessage.of(queue, record)
        result = await self.consumer.consume_directly(message)
        return request.reply(ResponseCode.SUCCESS, body=body.dumps(result).encode())


class PullConsumerCalls(_Calls):
    """A lite pull consumer's answers, as the Java client gives them for a
    DefaultLitePullConsumer: MQClientInstance resets offsets and reads offset tables of push
    consumers only, and has no listener of a lite one to run a message through."""

    def __init__(self, consumer: PullConsumer) -> None:
        super().__init__(consumer.group)
        self.consumer = consumer

    async def _reset_offset(self, request: RemotingCommand) -> None:
        # Java: "[reset-offset] consumer does not exist": the positions it polls from and the
        # offsets it commits stay as they are.
        header = ResetOffsetRequestHeader.from_ext(request.ext_fields)
        log.info("client.reset_offset_ignored", group=header.group, topic=header.topic)

    def _status(self, request: RemotingCommand) -> RemotingCommand:
        return request.reply(ResponseCode.SUCCESS, body=consumer_status_body())

    async def _consume_directly(self, request: RemotingCommand) -> RemotingCommand:
        # RocketMQ 5 answers so; 4.9's client fails casting the lite consumer to a push one,
        # a SYSTEM_ERROR too.
        header = ConsumeMessageDirectlyRequestHeader.from_ext(request.ext_fields)
        return _not_ours(request, header.consumer_group)

    def running_info(self) -> dict[str, Any]:
        """DefaultLitePullConsumerImpl.consumerRunningInfo: its settings (the fields of
        DefaultLitePullConsumer it has) and subscriptions; no queue or status tables."""
        consumer = self.consumer
        member = consumer.member
        auto_commit = consumer.auto_commit_interval_s
        properties = {
            "consumerGroup": consumer.group,
            "messageModel": member.message_model,
            "consumeFromWhere": CONSUME_FROM[member.consume_from],
            "autoCommit": "true" if auto_commit is not None else "false",
            "autoCommitIntervalMillis": str(int((auto_commit or 5.0) * 1000)),
            "pullBatchSize": str(consumer.batch),
            "pollTimeoutMillis": str(int(consumer.poll_timeout_s * 1000)),
            "unitMode": "false",
            **_client_properties(member, self.started_ms),
        }
        info: dict[str, Any] = {
            "mqTable": {},
            "properties": properties,
            "statusTable": {},
            "subscriptionSet": [s.to_json() for _, s in sorted(member.subscriptions.items())],
        }
        return info


def _thread_stacks() -> str:
    """Every thread's stack (the Java client sends its jstack here), and the loop's tasks."""
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        parts.append(f'"{names.get(ident, ident)}"\n{"".join(traceback.format_stack(frame))}')
    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:
        tasks = set()
    for task in tasks:
        frames = task.get_stack()
        where = "".join(traceback.format_stack(frames[-1])) if frames else ""
        parts.append(f'"task {task.get_name()}"\n{where}')
    return "\n".join(parts)

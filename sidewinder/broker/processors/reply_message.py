"""SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): a replier's answer to a request,
pushed to the requester with PUSH_REPLY_MESSAGE_TO_CLIENT (326) and stored in the reply topic
(RocketMQ 4.9's ReplyMessageProcessor).

    requester --SEND_MESSAGE_V2 (CORRELATION_ID, REPLY_TO_CLIENT, TTL)--> broker --> replier
    replier --SEND_REPLY_MESSAGE_V2 (<cluster>_REPLY_TOPIC, MSG_TYPE=reply)--> broker
    broker --PUSH_REPLY_MESSAGE_TO_CLIENT--> the producer connection whose heartbeat named
        REPLY_TO_CLIENT as its client id

The answer's code is the push's: SYSTEM_ERROR with RocketMQ's remark when the requester is not
connected (or did not take the reply), even when the reply was stored; a send's checks
(send.check.msg_check: topic name, forbidden topics, auto-creation, queue id) come first, with
a send's codes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable

import structlog

from sidewinder.broker.clients import Clients
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.send import host_of
from sidewinder.broker.send.check import msg_check
from sidewinder.broker.topics import TopicTable
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    SEND_V2_NAMES,
    ReplyMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from sidewinder.protocol.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    MessageConst,
    property_value,
)
from sidewinder.protocol.record import MessageToStore
from sidewinder.remoting.connection import Connection, RemotingError
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.store.message_store import STORED, MessageStore

log = structlog.get_logger(__name__)

PUSH_TIMEOUT_S = 10.0  # Broker2Client.callClient


class ReplyProcessor:
    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicTable,
        clients: Clients,
        topics_changed: Callable[[], Awaitable[None]],
    ) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.clients = clients
        self.topics_changed = topics_changed
        self.store_host = host_of(config.broker_addr)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        v2 = request.code == RequestCode.SEND_REPLY_MESSAGE_V2
        header = SendMessageRequestHeader.from_ext(
            request.ext_fields, names=SEND_V2_NAMES if v2 else None
        )
        topic = await msg_check(
            self.config, self.topics, header, ctx.remote_address, self.topics_changed
        )
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(max(topic.write_queue_nums, 1))
        ext = {
            MessageConst.MSG_REGION: self.config.region_id,
            MessageConst.TRACE_SWITCH: "true" if self.config.trace_on else "false",
        }
        problem = await self._push(ctx, request, header)
        if problem:
            code, remark = ResponseCode.SYSTEM_ERROR, problem
        else:
            code, remark = ResponseCode.SUCCESS, None
            ext |= SendMessageResponseHeader("0", queue_id, 0).to_ext()
        if self.config.store_reply_message_enable:
            result = await self.store.put_message(self._message(ctx, request, header, queue_id))
            if result.status in STORED and result.append is not None:
                ext |= SendMessageResponseHeader(
                    ",".join(result.append.msg_ids), queue_id, result.append.queue_offset
                ).to_ext()
            else:
                log.warning("reply.store_failed", status=result.status.name, remark=result.remark)
        return request.reply(code, remark, ext_fields=ext)

    async def _push(
        self, ctx: RequestContext, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> str:
        """Hand the reply to its requester; "" when it took it, else why not (the remark)."""
        properties = header.properties or ""
        requester = property_value(properties.encode(), MessageConst.MESSAGE_REPLY_TO_CLIENT)
        if requester is None:
            log.warning("reply.no_requester", remote=ctx.remote_address)
            return f"reply message properties[{MessageConst.MESSAGE_REPLY_TO_CLIENT}] is null"
        channel = self.clients.producer_channel(requester)
        if channel is None or not isinstance(channel.connection, Connection):
            remark = f"push reply message fail, channel of <{requester}> not found."
            log.warning("reply.requester_not_found", requester=requester)
            return remark
        pushed = properties.rstrip(PROPERTY_SEPARATOR)
        pushed += PROPERTY_SEPARATOR if pushed else ""
        pushed += f"{MessageConst.PUSH_REPLY_TIME}{NAME_VALUE_SEPARATOR}{int(time.time() * 1000)}"
        push_header = ReplyMessageRequestHeader(
            producer_group=header.producer_group,
            topic=header.topic,
            default_topic=header.default_topic,
            default_topic_queue_nums=header.default_topic_queue_nums,
            queue_id=header.queue_id,
            sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp,
            flag=header.flag,
            properties=pushed,
            reconsume_times=header.reconsume_times,
            unit_mode=bool(header.unit_mode),
            born_host=ctx.remote_address,
            store_host=self.config.broker_addr,
            store_timestamp=int(time.time() * 1000),
        )
        push = RemotingCommand.request(
            RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, push_header.to_ext(), request.body_bytes
        )
        try:
            answer = await channel.connection.invoke(push, PUSH_TIMEOUT_S)
        except (RemotingError, OSError) as exc:
            log.warning("reply.push_failed", requester=requester, error=str(exc))
            return f"push reply message to {requester}fail."
        if answer.code != ResponseCode.SUCCESS:
            log.warning("reply.push_refused", requester=requester, remark=answer.remark)
            return f"push reply message to {requester}fail."
        return ""

    def _message(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        queue_id: int,
    ) -> MessageToStore:
        """The reply as stored: the replier's properties as sent (no CLUSTER, WAIT kept)."""
        return MessageToStore(
            header.topic.encode(),
            queue_id,
            request.body_bytes,
            (header.properties or "").encode(),
            header.flag,
            header.sys_flag,
            header.born_timestamp,
            host_of(ctx.remote_address) if ctx.remote_address != "?" else self.store_host,
            self.store_host,
            header.reconsume_times or 0,
        )

"""Request-reply for the Python producer (RocketMQ 4.6+'s RPC over MQ).

    reply = await producer.request(Message("Prices", b"ask"), timeout_s=3)   # the requester

    async def on_messages(messages):                                         # the replier
        for m in messages:
            await replier.reply(m, b"answer")

The requester's message carries CORRELATION_ID, REPLY_TO_CLIENT (its client id) and TTL; the
replier sends `create_reply_message(request, body)` to <cluster>_REPLY_TOPIC with
SEND_REPLY_MESSAGE_V2, and the broker pushes it to the requester's connection with
PUSH_REPLY_MESSAGE_TO_CLIENT (326), which `ReplyReceiver` answers, as the Java client's
ClientRemotingProcessor.receiveReplyMessage does.
"""

from __future__ import annotations

import asyncio
import time
import uuid
import zlib
from dataclasses import dataclass

from sidewinder.client.pulling import ReceivedMessage
from sidewinder.client.route_cache import ClientError
from sidewinder.common.deadline import expire_after
from sidewinder.common.log import library_logger
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import ReplyMessageRequestHeader
from sidewinder.protocol.message import (
    REPLY_MESSAGE_FLAG,
    MessageConst,
    decode_properties,
    reply_topic,
)
from sidewinder.protocol.record import COMPRESSION_TYPE_MASK, COMPRESSION_ZLIB, MessageSysFlag
from sidewinder.remoting.dispatch import RequestContext

log = library_logger(__name__)

CREATE_REPLY_MESSAGE_EXCEPTION = 10007  # ClientErrorCode
REQUEST_TIMEOUT_EXCEPTION = 10006


class RequestTimeoutError(ClientError, TimeoutError):
    """No reply within the request's timeout."""


@dataclass(frozen=True)
class ReplyMessage:
    """A reply as the broker pushed it: the replier's message, with its origin."""

    topic: str
    queue_id: int
    body: bytes
    properties: dict[str, str]
    flag: int
    born_timestamp: int
    store_timestamp: int
    born_host: str  # "ip:port" of the replier
    store_host: str
    reconsume_times: int = 0

    @property
    def correlation_id(self) -> str | None:
        return self.properties.get(MessageConst.CORRELATION_ID)


def new_correlation_id() -> str:
    """CorrelationIdUtil.createCorrelationId: a random UUID."""
    return str(uuid.uuid4())


def request_properties(correlation_id: str, client_id: str, timeout_ms: int) -> dict[str, str]:
    """What DefaultMQProducerImpl.prepareSendRequest adds to a request message."""
    return {
        MessageConst.CORRELATION_ID: correlation_id,
        MessageConst.MESSAGE_REPLY_TO_CLIENT: client_id,
        MessageConst.MESSAGE_TTL: str(timeout_ms),
    }


def reply_properties(request: ReceivedMessage) -> tuple[str, dict[str, str]]:
    """The reply topic and properties for an answer to `request` (MessageUtil.createReplyMessage);
    ClientError when the request has no CLUSTER property (it did not come through a broker)."""
    props = request.properties
    cluster = props.get(MessageConst.CLUSTER)
    if cluster is None:
        raise ClientError(
            CREATE_REPLY_MESSAGE_EXCEPTION,
            "create reply message fail, requestMessage error, "
            f"property[{MessageConst.CLUSTER}] is null.",
        )
    copied = {
        MessageConst.MESSAGE_TYPE: REPLY_MESSAGE_FLAG,
        MessageConst.CORRELATION_ID: props.get(MessageConst.CORRELATION_ID),
        MessageConst.MESSAGE_REPLY_TO_CLIENT: props.get(MessageConst.MESSAGE_REPLY_TO_CLIENT),
        MessageConst.MESSAGE_TTL: props.get(MessageConst.MESSAGE_TTL),
    }
    return reply_topic(cluster), {k: v for k, v in copied.items() if v is not None}


def is_reply(properties: dict[str, str]) -> bool:
    return properties.get(MessageConst.MESSAGE_TYPE) == REPLY_MESSAGE_FLAG


class ReplyReceiver:
    """Serves PUSH_REPLY_MESSAGE_TO_CLIENT: completes the request waiting on its correlation id."""

    def __init__(self) -> None:
        self.waiting: dict[str, asyncio.Future[ReplyMessage]] = {}

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        try:
            reply = self._decode(request)
        except (ValueError, zlib.error) as exc:
            log.warning("client.reply_undecodable", error=str(exc))
            return request.reply(ResponseCode.SYSTEM_ERROR, "process reply message fail")
        # Left in the table for `wait` to take (the reply may come before it is awaited).
        future = self.waiting.get(reply.correlation_id or "")
        if future is None:
            log.warning(
                "client.reply_unmatched",
                correlation_id=reply.correlation_id,
                born_host=reply.born_host,
            )
        elif not future.done():
            future.set_result(reply)
        return request.reply(ResponseCode.SUCCESS)

    @staticmethod
    def _decode(request: RemotingCommand) -> ReplyMessage:
        header = ReplyMessageRequestHeader.from_ext(request.ext_fields)
        body = request.body_bytes
        if header.sys_flag & int(MessageSysFlag.COMPRESSED):
            kind = header.sys_flag & COMPRESSION_TYPE_MASK
            if kind not in (0, COMPRESSION_ZLIB):
                raise ValueError(f"compression type {kind:#x} is not zlib")
            body = zlib.decompress(body)
        properties = decode_properties((header.properties or "").encode())
        properties[MessageConst.REPLY_MESSAGE_ARRIVE_TIME] = str(int(time.time() * 1000))
        return ReplyMessage(
            header.topic,
            header.queue_id,
            body,
            properties,
            header.flag,
            header.born_timestamp,
            header.store_timestamp,
            header.born_host,
            header.store_host,
            header.reconsume_times or 0,
        )

    async def wait(self, correlation_id: str, timeout_s: float) -> ReplyMessage:
        future = self.waiting.get(correlation_id)
        assert future is not None, "expect() first"
        try:
            expiry = expire_after(future, timeout_s, error=TimeoutError())
            try:
                return await future
            finally:
                expiry.cancel()
        except TimeoutError:
            raise RequestTimeoutError(
                REQUEST_TIMEOUT_EXCEPTION,
                f"request timeout, no reply message to {correlation_id} "
                f"within {timeout_s * 1000:.0f} ms",
            ) from None
        finally:
            self.waiting.pop(correlation_id, None)

    def expect(self, correlation_id: str) -> None:
        self.waiting[correlation_id] = asyncio.get_running_loop().create_future()

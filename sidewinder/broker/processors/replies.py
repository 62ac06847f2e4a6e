"""What the admin handlers share: a JSON body reply, a MessageQueue map key, one code table.

table.register(ByCode({R.GET_ALL_TOPIC_CONFIG: topics.all_topics}), R.GET_ALL_TOPIC_CONFIG)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from sidewinder.protocol import body
from sidewinder.protocol.body import ObjectKey
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import BodyError
from sidewinder.remoting.dispatch import RequestContext

log = structlog.get_logger(__name__)

Handler = Callable[[RequestContext, RemotingCommand], Awaitable[RemotingCommand]]


class ByCode:
    """One admission pool (RocketMQ's admin executor) serving several codes, each by the
    handler routes.py names for it (a SidewinderError a handler raises becomes its reply in
    remoting's dispatcher, as any processor's does)."""

    def __init__(self, handlers: Mapping[int, Handler]) -> None:
        self.handlers = dict(handlers)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return await self.handlers[request.code](ctx, request)


def json_reply(request: RemotingCommand, value: Any) -> RemotingCommand:
    return request.reply(ResponseCode.SUCCESS, body=body.dumps(value).encode())


def queue_key(broker_name: str, topic: str, queue_id: int) -> ObjectKey:
    """A MessageQueue as fastjson writes it when it keys a map (offsetTable)."""
    return ObjectKey(brokerName=broker_name, queueId=queue_id, topic=topic)


def message_queue(broker_name: str, topic: str, queue_id: int) -> dict[str, Any]:
    return {"brokerName": broker_name, "queueId": queue_id, "topic": topic}


def json_body(
    request: RemotingCommand, what: str, shape: body.Shape | None = None
) -> dict[str, Any]:
    """The request's JSON object body, of `shape` when given; a SYSTEM_ERROR naming `what`
    was expected otherwise (BodyError)."""
    try:
        data = body.loads(request.body_bytes) if request.body else None
    except ValueError as exc:
        raise BodyError(f"the body is not a {what}: {exc}") from None
    if not isinstance(data, dict):
        raise BodyError(f"the body is not a {what}")
    if shape is not None:
        body.check_shape(data, shape, f"the body is not a {what}:")
    return data

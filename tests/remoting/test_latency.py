"""rocketmq_rpc_latency's records: a refusal counts as an answer with its code, as RocketMQ's
processors return refusals; a body that does not decode, as a failed request."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import BodyError, TopicNotExist
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.remoting.latency import RpcLatency, Timed


class Raising:
    def __init__(self, error: Exception) -> None:
        self.error = error

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        raise self.error


@pytest.mark.parametrize(
    ("error", "key"),
    [
        (TopicNotExist("topic[T] not exist"), (ResponseCode.TOPIC_NOT_EXIST, "success")),
        (BodyError("HEART_BEAT body is not valid JSON"), (1, "process_request_failed")),
        (RuntimeError("our bug"), (ResponseCode.SYSTEM_ERROR, "process_request_failed")),
    ],
)
def test_refusals_are_timed_by_their_code(error: Exception, key: tuple[int, str]) -> None:
    latency = RpcLatency()
    timed = Timed(Raising(error), latency)
    request = RemotingCommand.request(RequestCode.HEART_BEAT, {})
    ctx: Any = None  # the processor never looks at it
    with pytest.raises(type(error)):
        asyncio.run(timed.process(ctx, request))
    assert list(latency.buckets) == [(RequestCode.HEART_BEAT, key[0], False, key[1])]

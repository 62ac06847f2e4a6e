"""What a slave reads from its master besides the CommitLog (RocketMQ's SlaveSynchronize):
GET_ALL_CONSUMER_OFFSET (43) and GET_ALL_DELAY_OFFSET (45), each the JSON of the file it
mirrors (consumerOffset.json, delayOffset.json). Topics (21) and subscription groups (201) are
the topic and group admin's.

    replication = ReplicationAdmin(offsets, schedule)
"""

from __future__ import annotations

from typing import Any, Protocol

from sidewinder.broker.offsets import ConsumerOffsets
from sidewinder.broker.processors.replies import json_reply
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.dispatch import RequestContext


class DelayOffsets(Protocol):
    def to_json(self) -> dict[str, Any]: ...


class ReplicationAdmin:
    def __init__(self, offsets: ConsumerOffsets, delay_offsets: DelayOffsets) -> None:
        self.offsets = offsets
        self.delay_offsets = delay_offsets

    async def all_consumer_offsets(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        return json_reply(request, self.offsets.to_json())

    async def all_delay_offsets(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        return json_reply(request, self.delay_offsets.to_json())

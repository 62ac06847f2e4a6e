"""QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15), GET_MAX_OFFSET (30),
GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32)."""

from __future__ import annotations

from sidewinder.broker.offsets import ConsumerOffsets
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.store.message_store import MessageStore


class OffsetProcessor:
    def __init__(self, store: MessageStore, offsets: ConsumerOffsets) -> None:
        self.store = store
        self.offsets = offsets

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        code = request.code
        if code != RequestCode.UPDATE_CONSUMER_OFFSET:
            await self.store.caught_up()
        if code == RequestCode.QUERY_CONSUMER_OFFSET:
            header = QueryConsumerOffsetRequestHeader.from_ext(request.ext_fields)
            offset = self.offsets.query(header.consumer_group, header.topic, header.queue_id)
            if offset < 0:
                # No committed offset: a queue whose first message is still here starts at 0.
                if self.store.min_offset_in_queue(header.topic, header.queue_id) > 0:
                    return request.reply(
                        ResponseCode.QUERY_NOT_FOUND,
                        "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
                    )
                offset = 0
            return _offset(request, offset)
        if code == RequestCode.UPDATE_CONSUMER_OFFSET:
            update = UpdateConsumerOffsetRequestHeader.from_ext(request.ext_fields)
            self.offsets.commit(
                update.consumer_group, update.topic, update.queue_id, update.commit_offset
            )
            return request.reply(ResponseCode.SUCCESS)
        if code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            search = SearchOffsetRequestHeader.from_ext(request.ext_fields)
            return _offset(
                request, self.store.offset_by_time(search.topic, search.queue_id, search.timestamp)
            )
        queue = TopicQueueRequestHeader.from_ext(request.ext_fields)
        if code == RequestCode.GET_MAX_OFFSET:
            return _offset(request, self.store.max_offset_in_queue(queue.topic, queue.queue_id))
        if code == RequestCode.GET_MIN_OFFSET:
            return _offset(request, self.store.min_offset_in_queue(queue.topic, queue.queue_id))
        stamp = self.store.earliest_message_time(queue.topic, queue.queue_id)
        return request.reply(ResponseCode.SUCCESS, ext_fields={"timestamp": str(stamp)})


def _offset(request: RemotingCommand, offset: int) -> RemotingCommand:
    return request.reply(ResponseCode.SUCCESS, ext_fields=OffsetResponseHeader(offset).to_ext())

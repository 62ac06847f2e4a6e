"""QUERY_MESSAGE (12) by key or client msgId, VIEW_MESSAGE_BY_ID (33) by CommitLog offset."""

from __future__ import annotations

from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import SidewinderError
from sidewinder.protocol.headers import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.store.message_store import MessageStore

UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


class QueryProcessor:
    def __init__(self, store: MessageStore) -> None:
        self.store = store

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        await self.store.caught_up()
        if request.code == RequestCode.VIEW_MESSAGE_BY_ID:
            offset = ViewMessageRequestHeader.from_ext(request.ext_fields).offset
            record = self.store.lookup_message_by_offset(offset)
            data = self.store.record_bytes(offset, record.total_size) if record else None
            if data is None:
                raise SidewinderError(f"can not find message by the offset, {offset}")
            return request.reply(ResponseCode.SUCCESS, body=bytes(data))
        header = QueryMessageRequestHeader.from_ext(request.ext_fields)
        max_num = header.max_num
        if (request.ext_fields or {}).get(UNIQUE_KEY_QUERY, "").lower() == "true":
            max_num = self.store.config.default_query_max_num
        records = self.store.query_message(
            header.topic, header.key, max_num, header.begin_timestamp, header.end_timestamp
        )
        parts = [self.store.record_bytes(r.phy_offset, r.total_size) for r in records]
        found = [bytes(p) for p in parts if p is not None]
        last_stamp, last_phy = self.store.index_last_update()
        ext = QueryMessageResponseHeader(last_stamp, last_phy).to_ext()
        if not found:
            return request.reply(
                ResponseCode.QUERY_NOT_FOUND,
                "can not find message, maybe time range not correct",
                ext_fields=ext,
            )
        return request.reply(ResponseCode.SUCCESS, ext_fields=ext, body=b"".join(found))

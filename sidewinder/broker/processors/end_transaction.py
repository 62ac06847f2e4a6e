"""END_TRANSACTION (37): a producer's verdict on a half message, from its local transaction or
in answer to CHECK_TRANSACTION_STATE."""

from __future__ import annotations

from sidewinder.broker.topics import TRANS_HALF_TOPIC
from sidewinder.broker.transactions import COMMIT, ROLLBACK, Transactions
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import SidewinderError
from sidewinder.protocol.headers import EndTransactionRequestHeader
from sidewinder.protocol.message import MessageConst
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.store.message_store import MessageStore, PutStatus


class EndTransactionProcessor:
    def __init__(self, store: MessageStore, transactions: Transactions) -> None:
        self.store = store
        self.transactions = transactions

    async def process(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        header = EndTransactionRequestHeader.from_ext(request.ext_fields)
        if header.commit_or_rollback not in (COMMIT, ROLLBACK):
            return None  # unknown: the check service will ask again
        half = self.store.lookup_message_by_offset(header.commit_log_offset)
        if half is None or half.topic != TRANS_HALF_TOPIC:
            raise SidewinderError("Find prepared transaction message failed")
        props = half.properties()
        if props.get(MessageConst.PRODUCER_GROUP) != header.producer_group:
            raise SidewinderError("The producer group wrong")
        if half.queue_offset != header.tran_state_table_offset:
            raise SidewinderError("The transaction state table offset wrong")
        half = self.transactions.current(half)
        if half.queue_offset in self.transactions.settled:
            return request.reply(ResponseCode.SUCCESS)
        result = await self.transactions.settle(half, commit=header.commit_or_rollback == COMMIT)
        if result is not None and result.status is not PutStatus.PUT_OK:
            raise SidewinderError(f"{result.status.name} {result.remark}")
        return request.reply(ResponseCode.SUCCESS)

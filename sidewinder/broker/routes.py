"""The broker's processor table: every request code it serves, in one place."""

from __future__ import annotations

from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.processors.admin import AdminProcessor
from sidewinder.broker.processors.client_calls import CLIENT_CALL_CODES, ClientCallsProcessor
from sidewinder.broker.processors.clients import ClientManageProcessor
from sidewinder.broker.processors.end_transaction import EndTransactionProcessor
from sidewinder.broker.processors.offsets import OffsetProcessor
from sidewinder.broker.processors.pull import PullProcessor
from sidewinder.broker.processors.query import QueryProcessor
from sidewinder.broker.processors.reply import ReplyProcessor
from sidewinder.broker.processors.send import SendProcessor
from sidewinder.broker.processors.send_back import SendBackProcessor
from sidewinder.common.native import NATIVE
from sidewinder.protocol.codes import RequestCode as R
from sidewinder.remoting.dispatch import Limits, ProcessorTable


def build_routes(
    config: BrokerConfig,
    *,
    send: SendProcessor,
    send_back: SendBackProcessor,
    end_transaction: EndTransactionProcessor,
    pull: PullProcessor,
    query: QueryProcessor,
    clients: ClientManageProcessor,
    offsets: OffsetProcessor,
    admin: AdminProcessor,
    reply: ReplyProcessor,
    client_calls: ClientCallsProcessor | None = None,
) -> ProcessorTable:
    fast_failure = config.broker_fast_failure_enable
    table = ProcessorTable(default=admin)
    table.register(
        send,
        R.SEND_MESSAGE,
        R.SEND_MESSAGE_V2,
        R.SEND_BATCH_MESSAGE,
        limits=Limits(
            concurrency=256,
            capacity=config.send_thread_pool_queue_capacity,
            budget_ms=config.wait_time_mills_in_send_queue if fast_failure else 0,
        ),
    )
    if NATIVE is not None:
        # Plain sends read straight from their frames (the native header parser); without the
        # extension the send lane takes them decoded, which is faster than a Python parser.
        table.set_frame_lane(send.lane, R.SEND_MESSAGE_V2)
    table.register(send_back, R.CONSUMER_SEND_MSG_BACK)
    table.register(reply, R.SEND_REPLY_MESSAGE, R.SEND_REPLY_MESSAGE_V2)
    table.register(
        end_transaction,
        R.END_TRANSACTION,
        limits=Limits(
            concurrency=64,
            capacity=100_000,
            budget_ms=config.wait_time_mills_in_transaction_queue if fast_failure else 0,
        ),
    )
    table.register(
        pull,
        R.PULL_MESSAGE,
        limits=Limits(
            concurrency=10_000,  # held pulls wait on the loop, not in the queue
            capacity=config.pull_thread_pool_queue_capacity,
            budget_ms=config.wait_time_mills_in_pull_queue if fast_failure else 0,
        ),
    )
    table.register(
        query,
        R.QUERY_MESSAGE,
        R.VIEW_MESSAGE_BY_ID,
        limits=Limits(concurrency=16, capacity=config.query_thread_pool_queue_capacity),
    )
    table.register(
        clients,
        R.HEART_BEAT,
        R.UNREGISTER_CLIENT,
        R.CHECK_CLIENT_CONFIG,
        R.GET_CONSUMER_LIST_BY_GROUP,
        R.LOCK_BATCH_MQ,
        R.UNLOCK_BATCH_MQ,
        limits=Limits(
            concurrency=64,
            capacity=config.heartbeat_thread_pool_queue_capacity,
            budget_ms=config.wait_time_mills_in_heartbeat_queue if fast_failure else 0,
        ),
    )
    table.register(
        offsets,
        R.QUERY_CONSUMER_OFFSET,
        R.UPDATE_CONSUMER_OFFSET,
        R.SEARCH_OFFSET_BY_TIMESTAMP,
        R.GET_MAX_OFFSET,
        R.GET_MIN_OFFSET,
        R.GET_EARLIEST_MSG_STORETIME,
    )
    if client_calls is not None:
        table.register(client_calls, *CLIENT_CALL_CODES)
    return table

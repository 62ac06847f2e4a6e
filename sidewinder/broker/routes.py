"""The broker's processor table: every request code it serves, by name, in one place.

A code not listed here is answered REQUEST_CODE_NOT_SUPPORTED naming it, as RocketMQ's admin
processor (its default) answers codes it does not know.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.pop.ack import AckMessageProcessor, ChangeInvisibleTimeProcessor
from sidewinder.broker.pop.inspect import (
    NotificationProcessor,
    PeekMessageProcessor,
    PollingInfoProcessor,
)
from sidewinder.broker.pop.pop_message import PopMessageProcessor
from sidewinder.broker.processors.admin_acl import AclAdmin
from sidewinder.broker.processors.admin_config import BrokerConfigAdmin
from sidewinder.broker.processors.admin_groups import GroupAdmin
from sidewinder.broker.processors.admin_maintenance import Maintenance
from sidewinder.broker.processors.admin_replication import ReplicationAdmin
from sidewinder.broker.processors.admin_stats import StatsAdmin
from sidewinder.broker.processors.admin_topics import TopicAdmin
from sidewinder.broker.processors.assignment import AssignmentProcessor
from sidewinder.broker.processors.client_calls import ClientCallsProcessor
from sidewinder.broker.processors.clients import ClientManageProcessor
from sidewinder.broker.processors.end_transaction import EndTransactionProcessor
from sidewinder.broker.processors.offsets import OffsetProcessor
from sidewinder.broker.processors.pull import PullProcessor
from sidewinder.broker.processors.pull_lane import PullLane
from sidewinder.broker.processors.query import QueryProcessor
from sidewinder.broker.processors.recall import RecallProcessor
from sidewinder.broker.processors.replies import ByCode, Handler
from sidewinder.broker.processors.reply_message import ReplyProcessor
from sidewinder.broker.processors.send_back import SendBackProcessor
from sidewinder.broker.send import SendProcessor
from sidewinder.common.native import is_native
from sidewinder.protocol.codes import RequestCode as R
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import SidewinderError
from sidewinder.protocol.pop import (
    PopRequestCode,
)
from sidewinder.remoting.dispatch import Limits, NotSupported, ProcessorTable, RequestContext
from sidewinder.remoting.latency import RpcLatency
from sidewinder.store.config import BrokerRole


@dataclass(frozen=True)
class PopHandlers:
    """RocketMQ 5's POP consumption (sidewinder/broker/pop/)."""

    pop: PopMessageProcessor
    ack: AckMessageProcessor
    change_invisible: ChangeInvisibleTimeProcessor
    peek: PeekMessageProcessor
    notification: NotificationProcessor
    polling_info: PollingInfoProcessor


@dataclass(frozen=True)
class AdminHandlers:
    """The admin processors, split by concern."""

    topics: TopicAdmin
    groups: GroupAdmin
    stats: StatsAdmin
    config: BrokerConfigAdmin
    maintenance: Maintenance
    acl: AclAdmin
    replication: ReplicationAdmin
    assignment: AssignmentProcessor


def admin_codes(admin: AdminHandlers) -> dict[int, Handler]:
    """Every admin code (RocketMQ's AdminBrokerProcessor) and the handler that serves it."""
    topics, groups, stats = admin.topics, admin.groups, admin.stats
    config, maintenance, acl = admin.config, admin.maintenance, admin.acl
    return {
        R.UPDATE_AND_CREATE_TOPIC: topics.create_topic,
        R.DELETE_TOPIC_IN_BROKER: topics.delete_topic,
        R.GET_ALL_TOPIC_CONFIG: topics.all_topics,
        R.GET_TOPIC_CONFIG: topics.topic_config,
        R.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: topics.system_topics,
        R.QUERY_TOPIC_CONSUME_BY_WHO: topics.consumed_by,
        R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: groups.update_group,
        R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: groups.all_groups,
        R.GET_SUBSCRIPTIONGROUP_CONFIG: groups.group_config,
        R.DELETE_SUBSCRIPTIONGROUP: groups.delete_group,
        R.GET_CONSUMER_CONNECTION_LIST: groups.consumer_connections,
        R.GET_PRODUCER_CONNECTION_LIST: groups.producer_connections,
        R.GET_ALL_PRODUCER_INFO: groups.all_producers,
        R.GET_BROKER_RUNTIME_INFO: stats.runtime_info,
        R.GET_TOPIC_STATS_INFO: stats.topic_stats,
        R.GET_CONSUME_STATS: stats.consume_stats,
        R.QUERY_CONSUME_TIME_SPAN: stats.consume_time_span,
        R.VIEW_BROKER_STATS_DATA: stats.view_stats_data,
        R.GET_BROKER_CONSUME_STATS: stats.broker_consume_stats,
        R.UPDATE_BROKER_CONFIG: config.update,
        R.GET_BROKER_CONFIG: config.get,
        R.CLEAN_EXPIRED_CONSUMEQUEUE: maintenance.clean_expired_consume_queues,
        R.DELETE_EXPIRED_COMMITLOG: maintenance.delete_expired_commit_log,
        R.CLEAN_UNUSED_TOPIC: maintenance.clean_unused_topics,
        R.QUERY_CONSUME_QUEUE: maintenance.query_consume_queue,
        R.UPDATE_AND_CREATE_ACL_CONFIG: acl.update_access_config,
        R.DELETE_ACL_CONFIG: acl.delete_access_config,
        R.GET_BROKER_CLUSTER_ACL_INFO: acl.acl_config_version,
        R.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: acl.update_global_white_addrs,
        R.GET_BROKER_CLUSTER_ACL_CONFIG: acl.cluster_acl_config,
        R.GET_ALL_CONSUMER_OFFSET: admin.replication.all_consumer_offsets,
        R.GET_ALL_DELAY_OFFSET: admin.replication.all_delay_offsets,
        R.GET_ALL_MESSAGE_REQUEST_MODE: admin.assignment.all_modes,
    }


SLAVE_REFUSED_ADMIN = (
    R.UPDATE_AND_CREATE_TOPIC,
    R.DELETE_TOPIC_IN_BROKER,
    R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    R.DELETE_SUBSCRIPTIONGROUP,
)


async def _refused_on_a_slave(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    raise SidewinderError(
        "Can't modify topic or subscription group from slave broker, "
        "please execute it from master broker."
    )


class _SlaveEndTransaction:
    """A slave takes no transaction's end: its master stores the outcome."""

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.reply(ResponseCode.SLAVE_NOT_AVAILABLE)


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
    admin: AdminHandlers,
    reply: ReplyProcessor,
    client_calls: ClientCallsProcessor,
    assignment: AssignmentProcessor,
    pop: PopHandlers | None = None,
    recall: RecallProcessor | None = None,
    latency: RpcLatency | None = None,
) -> ProcessorTable:
    fast_failure = config.broker_fast_failure_enable
    table = ProcessorTable(default=NotSupported())
    # Every send, one pipeline: sidewinder/broker/send/ (decode -> route -> store -> reply).
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
    if is_native("send_v2_fields"):
        # The send pipeline's fast decoder: plain sends read straight from their frames (the
        # native header reader); without the extension they are decoded the generic way, which
        # is faster than a header reader in Python.
        table.set_frame_lane(send, R.SEND_MESSAGE_V2)
    table.register(send_back, R.CONSUMER_SEND_MSG_BACK)
    table.register(reply, R.SEND_REPLY_MESSAGE, R.SEND_REPLY_MESSAGE_V2)
    table.register(
        _SlaveEndTransaction() if config.store.broker_role is BrokerRole.SLAVE else end_transaction,
        R.END_TRANSACTION,
        limits=Limits(
            concurrency=64,
            capacity=100_000,
            budget_ms=config.wait_time_mills_in_transaction_queue if fast_failure else 0,
        ),
    )
    # LITE_PULL_MESSAGE (RocketMQ 5's lite pull consumer) is a pull: the same processor.
    table.register(
        pull,
        R.PULL_MESSAGE,
        R.LITE_PULL_MESSAGE,
        limits=Limits(
            concurrency=10_000,  # held pulls wait on the loop, not in the queue
            capacity=config.pull_thread_pool_queue_capacity,
            budget_ms=config.wait_time_mills_in_pull_queue if fast_failure else 0,
        ),
    )
    # Plain pulls read and answered straight from their frames (pull_lane.py); `latency`
    # times them, as the metrics' wrapper times the processor's `process` calls.
    table.set_frame_taker(PullLane(pull, latency), R.PULL_MESSAGE)
    if recall is not None:
        table.register(recall, R.RECALL_MESSAGE)
    if pop is not None:
        # Held pops wait on the loop, as held pulls do.
        table.register(pop.pop, PopRequestCode.POP_MESSAGE, limits=Limits(concurrency=10_000))
        table.register(pop.ack, PopRequestCode.ACK_MESSAGE, PopRequestCode.BATCH_ACK_MESSAGE)
        table.register(pop.change_invisible, PopRequestCode.CHANGE_MESSAGE_INVISIBLETIME)
        table.register(pop.peek, PopRequestCode.PEEK_MESSAGE)
        table.register(
            pop.notification, PopRequestCode.NOTIFICATION, limits=Limits(concurrency=10_000)
        )
        table.register(pop.polling_info, PopRequestCode.POLLING_INFO)
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
    handlers = admin_codes(admin)
    if config.store.broker_role is BrokerRole.SLAVE:
        # A slave's topics and groups are its master's copies (AdminBrokerProcessor's
        # validateSlave).
        for code in SLAVE_REFUSED_ADMIN:
            handlers[code] = _refused_on_a_slave
    table.register(ByCode(handlers), *handlers)
    # RocketMQ 5's server-side load balancing (its loadBalanceExecutor).
    table.register(assignment, R.QUERY_ASSIGNMENT, R.SET_MESSAGE_REQUEST_MODE)
    # mqadmin's calls the broker forwards to a client (Broker2Client).
    table.register(
        client_calls,
        R.INVOKE_BROKER_TO_RESET_OFFSET,
        R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
        R.GET_CONSUMER_RUNNING_INFO,
        R.CONSUME_MESSAGE_DIRECTLY,
    )
    return table

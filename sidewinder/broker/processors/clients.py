"""HEART_BEAT (34), UNREGISTER_CLIENT (35), CHECK_CLIENT_CONFIG (46),
GET_CONSUMER_LIST_BY_GROUP (38), LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sidewinder.broker.clients import Clients
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.groups import SubscriptionGroups
from sidewinder.broker.sql_filter import SqlFilterError, compile_sql
from sidewinder.broker.topics import RETRY_GROUP_TOPIC_PREFIX, TopicTable
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import ConsumerGroupHeader, UnregisterClientRequestHeader
from sidewinder.remoting.dispatch import RequestContext

LOCK_MAX_LIVE_S = 60.0  # rocketmq.broker.rebalance.lockMaxLiveTime


class ClientManageProcessor:
    def __init__(
        self,
        config: BrokerConfig,
        clients: Clients,
        groups: SubscriptionGroups,
        topics: TopicTable,
        *,
        metadata_changed: Callable[[], None],
    ) -> None:
        self.config = config
        self.clients = clients
        self.groups = groups
        self.topics = topics
        # Persist groups and topics and re-register, once per burst (a heartbeat made some).
        self.metadata_changed = metadata_changed
        # (group, topic, brokerName, queueId) -> (clientId, last lock time)
        self.locks: dict[tuple[str, str, str, int], tuple[str, float]] = {}

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        code = request.code
        if code == RequestCode.HEART_BEAT:
            return self._heartbeat(ctx, request)
        if code == RequestCode.UNREGISTER_CLIENT:
            header = UnregisterClientRequestHeader.from_ext(request.ext_fields)
            self.clients.unregister(
                header.client_id, ctx.connection, header.consumer_group, header.producer_group
            )
            return request.reply(ResponseCode.SUCCESS)
        if code == RequestCode.CHECK_CLIENT_CONFIG:
            return self._check_client_config(request)
        if code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
            group = ConsumerGroupHeader.from_ext(request.ext_fields).consumer_group
            found = self.clients.consumers.get(group)
            if found is None or not found.channels:
                return request.reply(
                    ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}"
                )
            return request.reply(
                ResponseCode.SUCCESS,
                body=body.dumps({"consumerIdList": found.client_ids()}).encode(),
            )
        if code == RequestCode.LOCK_BATCH_MQ:
            return self._lock(request)
        return self._unlock(request)

    def _check_client_config(self, request: RemotingCommand) -> RemotingCommand:
        """A consumer's subscription before it starts: SQL92 needs enablePropertyFilter and an
        expression that compiles (SUBSCRIPTION_PARSE_FAILED naming it otherwise)."""
        try:
            data = _json(request)
        except ValueError as exc:
            return request.reply(ResponseCode.SYSTEM_ERROR, f"the body is not JSON: {exc}")
        sub = data.get("subscriptionData")
        if not isinstance(sub, dict):
            return request.reply(ResponseCode.SUCCESS)
        kind = str(sub.get("expressionType") or "TAG")
        if kind.upper() == "TAG":
            return request.reply(ResponseCode.SUCCESS)
        if not self.config.enable_property_filter:
            return request.reply(
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {kind}",
            )
        if kind.upper() != "SQL92":
            # RocketMQ's FilterFactory has no such filter and the lookup throws.
            return request.reply(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"unknown expression type {kind}"
            )
        expression = str(sub.get("subString") or "")
        try:
            compile_sql(expression)
        except SqlFilterError as exc:
            return request.reply(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                f"Parse the consumer's subscription[{expression}] failed: {exc}",
            )
        return request.reply(ResponseCode.SUCCESS)

    def _heartbeat(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        data = _json(request)
        language = request.language.name
        self.clients.heartbeat(data, ctx.connection, language, request.version)
        changed = False
        for consumer in data.get("consumerDataSet") or []:
            name = str(consumer.get("groupName", ""))
            known = name in self.groups.groups
            group = self.groups.find(name)
            changed |= group is not None and not known
            if group is not None and group.retry_queue_nums > 0:
                retry = f"{RETRY_GROUP_TOPIC_PREFIX}{name}"
                if self.topics.get(retry) is None:
                    self.topics.create_retry_topic(retry, group.retry_queue_nums)
                    changed = True
        if changed:
            self.metadata_changed()
        return request.reply(ResponseCode.SUCCESS)

    def _lock(self, request: RemotingCommand) -> RemotingCommand:
        data = _json(request)
        group, client = str(data.get("consumerGroup")), str(data.get("clientId"))
        now = time.monotonic()
        locked = []
        for mq in data.get("mqSet") or []:
            key = (
                group,
                str(mq.get("topic")),
                str(mq.get("brokerName")),
                int(mq.get("queueId", 0)),
            )
            holder = self.locks.get(key)
            if holder is None or holder[0] == client or now - holder[1] > LOCK_MAX_LIVE_S:
                self.locks[key] = (client, now)
                locked.append(mq)
        return request.reply(
            ResponseCode.SUCCESS, body=body.dumps({"lockOKMQSet": locked}).encode()
        )

    def _unlock(self, request: RemotingCommand) -> RemotingCommand:
        data = _json(request)
        group, client = str(data.get("consumerGroup")), str(data.get("clientId"))
        for mq in data.get("mqSet") or []:
            key = (
                group,
                str(mq.get("topic")),
                str(mq.get("brokerName")),
                int(mq.get("queueId", 0)),
            )
            holder = self.locks.get(key)
            if holder is not None and holder[0] == client:
                del self.locks[key]
        return request.reply(ResponseCode.SUCCESS)


def _json(request: RemotingCommand) -> dict[str, Any]:
    if not request.body:
        return {}
    data = body.loads(request.body_bytes)
    if not isinstance(data, dict):
        raise ValueError("the request body is not a JSON object")
    return data

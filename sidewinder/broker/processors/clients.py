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
from sidewinder.protocol.errors import SidewinderError, SubscriptionParseFailed
from sidewinder.protocol.headers import ConsumerGroupHeader, UnregisterClientRequestHeader
from sidewinder.remoting.dispatch import RequestContext

LOCK_MAX_LIVE_S = 60.0  # rocketmq.broker.rebalance.lockMaxLiveTime

# The parts of HeartbeatData and LockBatchRequestBody this broker reads (protocol/body.py).
HEARTBEAT_SHAPE: body.Shape = {
    "clientID": str,
    "producerDataSet": [{"groupName": str}],
    "consumerDataSet": [
        {
            "groupName": str,
            "consumeType": str,
            "messageModel": str,
            "consumeFromWhere": str,
            "subscriptionDataSet": [
                {
                    "topic": str,
                    "subString": str,
                    "subVersion": int,
                    "expressionType": str,
                    "tagsSet": [str],
                    "codeSet": [int],
                }
            ],
        }
    ],
}
LOCK_BATCH_SHAPE: body.Shape = {
    "consumerGroup": str,
    "clientId": str,
    "mqSet": [{"topic": str, "brokerName": str, "queueId": int}],
}


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
                raise SidewinderError(f"no consumer for this group, {group}")
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
        sub = body.request_object(request).get("subscriptionData")
        if not isinstance(sub, dict):
            return request.reply(ResponseCode.SUCCESS)
        kind = str(sub.get("expressionType") or "TAG")
        if kind.upper() == "TAG":
            return request.reply(ResponseCode.SUCCESS)
        if not self.config.enable_property_filter:
            raise SidewinderError(
                f"The broker does not support consumer to filter message by {kind}"
            )
        if kind.upper() != "SQL92":
            # RocketMQ's FilterFactory has no such filter and the lookup throws.
            raise SubscriptionParseFailed(f"unknown expression type {kind}")
        expression = str(sub.get("subString") or "")
        try:
            compile_sql(expression)
        except SqlFilterError as exc:
            raise SubscriptionParseFailed(
                f"Parse the consumer's subscription[{expression}] failed: {exc}"
            ) from None
        return request.reply(ResponseCode.SUCCESS)

    def _heartbeat(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        data = body.request_object(request, HEARTBEAT_SHAPE)
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
        data = body.request_object(request, LOCK_BATCH_SHAPE)
        group, client = str(data.get("consumerGroup")), str(data.get("clientId"))
        now = time.monotonic()
        locked = []
        for mq in data.get("mqSet") or []:
            key = _queue_key(group, mq)
            holder = self.locks.get(key)
            if holder is None or holder[0] == client or now - holder[1] > LOCK_MAX_LIVE_S:
                self.locks[key] = (client, now)
                locked.append(mq)
        return request.reply(
            ResponseCode.SUCCESS, body=body.dumps({"lockOKMQSet": locked}).encode()
        )

    def _unlock(self, request: RemotingCommand) -> RemotingCommand:
        data = body.request_object(request, LOCK_BATCH_SHAPE)
        group, client = str(data.get("consumerGroup")), str(data.get("clientId"))
        for mq in data.get("mqSet") or []:
            key = _queue_key(group, mq)
            holder = self.locks.get(key)
            if holder is not None and holder[0] == client:
                del self.locks[key]
        return request.reply(ResponseCode.SUCCESS)


def _queue_key(group: str, mq: dict[str, Any]) -> tuple[str, str, str, int]:
    return (group, str(mq.get("topic")), str(mq.get("brokerName")), int(mq.get("queueId") or 0))

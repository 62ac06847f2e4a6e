"""Group and client admin: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200),
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), GET_SUBSCRIPTIONGROUP_CONFIG (352, RocketMQ 5),
DELETE_SUBSCRIPTIONGROUP (207),
GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204), GET_ALL_PRODUCER_INFO
(328).

    groups = GroupAdmin(
        group_table, offsets, clients,
        metadata_saved=app.saved, group_deleted=stats.on_group_deleted,
    )
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from sidewinder.broker.attributes import GROUP_ATTRIBUTES, alter_attributes
from sidewinder.broker.clients import ClientChannel, Clients
from sidewinder.broker.groups import SubscriptionGroup, SubscriptionGroups
from sidewinder.broker.offsets import ConsumerOffsets
from sidewinder.broker.processors.replies import json_body, json_reply
from sidewinder.protocol.body import Shape
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import SidewinderError, SubscriptionGroupNotExist
from sidewinder.protocol.headers import ConsumerGroupHeader, GroupHeader, GroupNameHeader
from sidewinder.remoting.dispatch import RequestContext

# The typed fields of a SubscriptionGroupConfig (SubscriptionGroup.from_json reads them).
SUBSCRIPTION_GROUP_SHAPE: Shape = {
    "retryQueueNums": int,
    "retryMaxTimes": int,
    "brokerId": int,
    "whichBrokerWhenConsumeSlowly": int,
    "groupSysFlag": int,
    "consumeTimeoutMinute": int,
    "attributes": {"*": str},
}


class GroupAdmin:
    def __init__(
        self,
        groups: SubscriptionGroups,
        offsets: ConsumerOffsets,
        clients: Clients,
        *,
        metadata_saved: Callable[[], Awaitable[None]],
        group_deleted: Callable[[str], None],
    ) -> None:
        self.groups = groups
        self.offsets = offsets
        self.clients = clients
        self.metadata_saved = metadata_saved
        self.group_deleted = group_deleted  # the statistics forget the group

    async def update_group(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        data = json_body(request, "SubscriptionGroupConfig", SUBSCRIPTION_GROUP_SHAPE)
        if not data.get("groupName"):
            raise SidewinderError("the body is not a SubscriptionGroupConfig: no groupName")
        existing = self.groups.groups.get(str(data["groupName"]))
        # SubscriptionGroupManager: the body's attributes are a modification ("+key": value).
        data["attributes"] = alter_attributes(
            GROUP_ATTRIBUTES,
            existing.attributes if existing is not None else {},
            {str(k): str(v) for k, v in (data.get("attributes") or {}).items()},
            create=existing is None,
        )
        self.groups.upsert(SubscriptionGroup.from_json(data))
        await self.metadata_saved()
        return request.reply(ResponseCode.SUCCESS)

    async def group_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_SUBSCRIPTIONGROUP_CONFIG: one group as RocketMQ 5 writes it (created first when
        auto-creation is on, as findSubscriptionGroupConfig does)."""
        group = GroupHeader.from_ext(request.ext_fields).group
        found = self.groups.find(group)
        if found is None:
            raise SubscriptionGroupNotExist("No group in this broker")
        return json_reply(request, found.to_json(full=True))

    async def all_groups(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return json_reply(request, self.groups.to_json())

    async def delete_group(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = GroupNameHeader.from_ext(request.ext_fields)
        self.groups.delete(header.group_name)
        if header.remove_offset:
            self.offsets.remove_group(header.group_name)
        self.group_deleted(header.group_name)
        await self.metadata_saved()
        return request.reply(ResponseCode.SUCCESS)

    async def consumer_connections(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        group = ConsumerGroupHeader.from_ext(request.ext_fields).consumer_group
        found = self.clients.consumers.get(group)
        if found is None or not found.channels:
            raise SidewinderError(
                f"the consumer group[{group}] not online", ResponseCode.CONSUMER_NOT_ONLINE
            )
        return json_reply(
            request,
            {
                "connectionSet": _connections(found.channels.values()),
                "consumeFromWhere": found.consume_from_where,
                "consumeType": found.consume_type,
                "messageModel": found.message_model,
                "subscriptionTable": {t: s.to_json() for t, s in found.subscriptions.items()},
            },
        )

    async def producer_connections(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        group = (request.ext_fields or {}).get("producerGroup", "")
        channels = self.clients.producers.get(group) or {}
        if not channels:
            raise SidewinderError(f"the producer group[{group}] not exist")
        return json_reply(request, {"connectionSet": _connections(channels.values())})

    async def all_producers(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """ProducerTableInfo, what `mqadmin producer -b` prints a line of per instance."""
        now_ms, now_s = time.time() * 1000, time.monotonic()
        data = {
            group: [
                {
                    "clientId": c.client_id,
                    "language": c.language,
                    "lastUpdateTimestamp": int(now_ms - (now_s - c.last_update_s) * 1000),
                    # Netty's SocketAddress.toString(), as RocketMQ fills it in.
                    "remoteIP": f"/{c.address}",
                    "version": c.version,
                }
                for c in channels.values()
            ]
            for group, channels in self.clients.producers.items()
            if channels
        }
        return json_reply(request, {"data": data})


def _connections(channels: Iterable[ClientChannel]) -> list[dict[str, Any]]:
    return [
        {
            "clientAddr": c.address,
            "clientId": c.client_id,
            "language": c.language,
            "version": c.version,
        }
        for c in channels
    ]

"""What the console shows of consumer groups: the list with each group's total lag, one
group's queues, clients and subscriptions, and the two changes (reset by time, delete).

    view = GroupView(Admin("127.0.0.1:9876"), cluster_view)
    rows = await view.groups(sort="lag")      # most behind first
    detail = await view.group_detail("billing")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidewinder.client.admin import Admin, QueueProgress
from sidewinder.client.admin_groups import (
    consumer_connection,
    is_system_group,
    reset_offset,
    reset_offset_old,
)
from sidewinder.client.route_cache import ClientError
from sidewinder.console.calls import fan_out, guarded
from sidewinder.console.cluster import ClusterView
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, version_desc

GROUP_SORTS = ("lag", "name", "tps", "clients")


@dataclass
class GroupRow:
    name: str
    lag: int = 0
    consume_tps: float = 0.0
    queues: int = 0
    clients: int = 0
    consume_type: str = ""
    message_model: str = ""
    error: str | None = None


def sort_groups(rows: list[GroupRow], sort: str, descending: bool) -> list[GroupRow]:
    keys = {
        "name": lambda r: r.name,
        "lag": lambda r: (r.lag, r.name),
        "tps": lambda r: (r.consume_tps, r.name),
        "clients": lambda r: (r.clients, r.name),
    }
    return sorted(rows, key=keys.get(sort, keys["lag"]), reverse=descending)


def connection_rows(connection: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "client_id": c.get("clientId", ""),
            "client_addr": c.get("clientAddr", ""),
            "language": c.get("language", ""),
            "version": version_desc(int(c.get("version", 0))),
        }
        for c in sorted(connection.get("connectionSet") or [], key=lambda c: c.get("clientId", ""))
    ]


def subscription_rows(connection: dict[str, Any]) -> list[dict[str, str]]:
    table = connection.get("subscriptionTable") or {}
    return [
        {"topic": topic, "expression": sub.get("subString", "*"), "type": sub.get("expressionType")}
        for topic, sub in sorted(table.items())
    ]


def progress_rows(queues: list[QueueProgress]) -> list[dict[str, Any]]:
    return [
        {
            "topic": p.queue.topic,
            "broker": p.queue.broker_name,
            "queue_id": p.queue.queue_id,
            "broker_offset": p.broker_offset,
            "consumer_offset": p.consumer_offset,
            "lag": p.lag,
            "last_timestamp": p.last_timestamp,
        }
        for p in queues
    ]


class GroupView:
    def __init__(self, admin: Admin, cluster: ClusterView) -> None:
        self.admin = admin
        self.cluster = cluster

    async def group_names(self) -> set[str]:
        replies = await self.cluster.ask_masters(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        names: set[str] = set()
        for outcome in replies.values():
            if outcome.ok and outcome.value is not None:
                table = body.loads(outcome.value.body_bytes).get("subscriptionGroupTable") or {}
                names |= {n for n in table if not is_system_group(n)}
        return names

    async def groups(
        self, sort: str = "lag", descending: bool = True, search: str = ""
    ) -> list[GroupRow]:
        """Every group the masters know, with its total lag over them and its clients."""
        masters = await self.cluster.masters()
        names = sorted(n for n in await self.group_names() if search.lower() in n.lower())
        rows = {name: GroupRow(name) for name in names}
        stats = await fan_out(
            {
                (name, addr): self.admin.consume_stats_at(addr, name)
                for name in names
                for addr in masters.values()
            }
        )
        for (name, _), outcome in stats.items():
            row = rows[name]
            if outcome.ok and outcome.value is not None:
                queues, tps = outcome.value
                row.lag += sum(q.lag for q in queues)
                row.queues += len(queues)
                row.consume_tps += tps
            else:
                row.error = outcome.error
        first = next(iter(masters.values()), None)
        if first is not None:
            connections = await fan_out(
                {name: consumer_connection(self.admin, name, first) for name in names}
            )
            for name, online in connections.items():
                if online.ok and online.value is not None:
                    rows[name].clients = len(online.value.get("connectionSet") or [])
                    rows[name].consume_type = online.value.get("consumeType", "")
                    rows[name].message_model = online.value.get("messageModel", "")
        return sort_groups(list(rows.values()), sort, descending)

    async def group_detail(self, group: str) -> dict[str, Any]:
        masters = await self.cluster.masters()
        stats = await guarded(self.admin.consume_stats(group))
        first = next(iter(masters.values()), None)
        connection = await guarded(consumer_connection(self.admin, group, first))
        queues = stats.value.queues if stats.value else []
        online = connection.value or {}
        return {
            "group": group,
            "lag": sum(q.lag for q in queues),
            "consume_tps": stats.value.consume_tps if stats.value else 0.0,
            "queues": progress_rows(queues),
            "queues_error": stats.error,
            "topics": sorted({q.queue.topic for q in queues}),
            "connections": connection_rows(online),
            "subscriptions": subscription_rows(online),
            "consume_type": online.get("consumeType", ""),
            "message_model": online.get("messageModel", ""),
            "connection_error": connection.error,
        }

    async def reset_offset(self, group: str, topic: str, timestamp_ms: int) -> list[dict[str, Any]]:
        """Each queue's new offset: through the broker when a client of the group is online
        (it tells the clients), else written by the console itself, as mqadmin does when the
        broker answers CONSUMER_NOT_ONLINE (or, for a group it has no record of, an error)."""
        try:
            table = await reset_offset(self.admin, topic, group, timestamp_ms)
            return [
                {"broker": q.broker_name, "queue_id": q.queue_id, "offset": offset}
                for q, offset in sorted(table)
            ]
        except ClientError:
            pass
        rows = await reset_offset_old(self.admin, group, topic, timestamp_ms)
        return [
            {
                "broker": r.queue.broker_name,
                "queue_id": r.queue.queue_id,
                "offset": r.rollback_offset,
            }
            for r in rows
        ]

    async def delete_group(self, group: str) -> list[str]:
        masters = await self.cluster.masters()
        ext = {"groupName": group, "removeOffset": "true"}
        for addr in masters.values():
            await self.admin.ask_broker(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, ext)
        return sorted(masters.values())

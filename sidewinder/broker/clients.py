"""Producers and consumers known from heartbeats (RocketMQ's ProducerManager, ConsumerManager).

A consumer group's membership changes when a client joins, leaves (UNREGISTER_CLIENT), its
connection closes or it falls silent; then every remaining member is told with a oneway
NOTIFY_CONSUMER_IDS_CHANGED so it rebalances at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sidewinder.protocol.subscription import Subscription, parse_tag_expression

CHANNEL_EXPIRED_S = 120.0
CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY")
MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
CONSUME_FROM = {
    0: "CONSUME_FROM_LAST_OFFSET",
    1: "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    2: "CONSUME_FROM_MIN_OFFSET",
    3: "CONSUME_FROM_MAX_OFFSET",
    4: "CONSUME_FROM_FIRST_OFFSET",
    5: "CONSUME_FROM_TIMESTAMP",
}


def _enum_name(value: Any, names: tuple[str, ...] | dict[int, str], default: str) -> str:
    """An enum sent by name (Java, Go) or by ordinal (the C++ core)."""
    if isinstance(value, str) and not value.lstrip("-").isdigit():
        return value
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    if isinstance(names, dict):
        return names.get(number, default)
    return names[number] if 0 <= number < len(names) else default


@dataclass
class ClientChannel:
    client_id: str
    connection: Any
    language: str
    version: int
    last_update_s: float = field(default_factory=time.monotonic)

    @property
    def address(self) -> str:
        return str(getattr(self.connection, "remote_address", "?"))


@dataclass
class ConsumerGroup:
    name: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    channels: dict[int, ClientChannel] = field(default_factory=dict)  # id(connection) -> client

    def client_ids(self) -> list[str]:
        return [c.client_id for c in self.channels.values()]


class Clients:
    def __init__(self, notify: Callable[[ConsumerGroup], None]) -> None:
        self.consumers: dict[str, ConsumerGroup] = {}
        self.producers: dict[str, dict[int, ClientChannel]] = {}
        self._notify = notify

    def heartbeat(self, data: dict[str, Any], connection: Any, language: str, version: int) -> None:
        client_id = str(data.get("clientID", ""))
        for producer in data.get("producerDataSet") or []:
            group = str(producer.get("groupName", ""))
            channels = self.producers.setdefault(group, {})
            existing = channels.get(id(connection))
            if existing is None:
                channels[id(connection)] = ClientChannel(client_id, connection, language, version)
            else:
                existing.last_update_s = time.monotonic()
        for consumer in data.get("consumerDataSet") or []:
            self._consumer_heartbeat(consumer, client_id, connection, language, version)

    def _consumer_heartbeat(
        self, consumer: dict[str, Any], client_id: str, connection: Any, language: str, version: int
    ) -> None:
        name = str(consumer.get("groupName", ""))
        group = self.consumers.get(name)
        if group is None:
            group = self.consumers[name] = ConsumerGroup(name)
        group.consume_type = _enum_name(
            consumer.get("consumeType"), CONSUME_TYPES, group.consume_type
        )
        group.message_model = _enum_name(
            consumer.get("messageModel"), MESSAGE_MODELS, group.message_model
        )
        group.consume_from_where = _enum_name(
            consumer.get("consumeFromWhere"), CONSUME_FROM, group.consume_from_where
        )
        changed = False
        channel = group.channels.get(id(connection))
        if channel is None or channel.client_id != client_id:
            group.channels[id(connection)] = ClientChannel(client_id, connection, language, version)
            changed = True
        else:
            channel.last_update_s = time.monotonic()
        for sub in consumer.get("subscriptionDataSet") or []:
            topic = str(sub.get("topic", ""))
            sub_string = str(sub.get("subString", "*"))
            tags, codes = parse_tag_expression(sub_string)
            version_value = int(sub.get("subVersion") or 0)
            old = group.subscriptions.get(topic)
            if old is None or old.sub_string != sub_string:
                group.subscriptions[topic] = Subscription(
                    topic,
                    sub_string,
                    tags,
                    codes,
                    version_value,
                    str(sub.get("expressionType") or "TAG"),
                )
        if changed:
            self._notify(group)

    def unregister(
        self,
        client_id: str,
        connection: Any,
        consumer_group: str | None,
        producer_group: str | None,
    ) -> None:
        if producer_group:
            self.producers.get(producer_group, {}).pop(id(connection), None)
        if consumer_group:
            group = self.consumers.get(consumer_group)
            if group is not None and group.channels.pop(id(connection), None) is not None:
                self._after_leave(group)

    def connection_closed(self, connection: Any) -> None:
        for channels in self.producers.values():
            channels.pop(id(connection), None)
        for group in list(self.consumers.values()):
            if group.channels.pop(id(connection), None) is not None:
                self._after_leave(group)

    def expire(self, now_s: float) -> None:
        for channels in self.producers.values():
            for key, channel in list(channels.items()):
                if now_s - channel.last_update_s > CHANNEL_EXPIRED_S:
                    del channels[key]
        for group in list(self.consumers.values()):
            stale = [
                k for k, c in group.channels.items() if now_s - c.last_update_s > CHANNEL_EXPIRED_S
            ]
            for key in stale:
                del group.channels[key]
            if stale:
                self._after_leave(group)

    def _after_leave(self, group: ConsumerGroup) -> None:
        if group.channels:
            self._notify(group)
        else:
            del self.consumers[group.name]

    def producer_channel(self, client_id: str) -> ClientChannel | None:
        """The connection of a producer by its client id (ProducerManager.findChannel), the
        most recently heard one when it has several."""
        found = [
            channel
            for channels in self.producers.values()
            for channel in channels.values()
            if channel.client_id == client_id
        ]
        return max(found, key=lambda c: c.last_update_s, default=None)

    def subscription(self, group: str, topic: str) -> Subscription | None:
        found = self.consumers.get(group)
        return found.subscriptions.get(topic) if found else None

    def groups_of_topic(self, topic: str) -> list[str]:
        return sorted(n for n, g in self.consumers.items() if topic in g.subscriptions)

"""Subscription groups (RocketMQ's SubscriptionGroupManager): config/subscriptionGroup.json,
auto-created on a consumer's first heartbeat when autoCreateSubscriptionGroup is on."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sidewinder.broker.metadata import JsonTable
from sidewinder.broker.retry_policy import DEFAULT_RETRY_POLICY, retry_policy_from_json
from sidewinder.protocol.data_version import DataVersion


@dataclass(frozen=True)
class SubscriptionGroup:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    # RocketMQ 5's fields (SubscriptionGroupConfig of 5.x).
    consume_message_orderly: bool = False
    group_retry_policy: Mapping[str, Any] = field(
        default_factory=lambda: dict(DEFAULT_RETRY_POLICY), hash=False
    )
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    attributes: Mapping[str, str] = field(default_factory=dict, hash=False)

    def has_5x_fields(self) -> bool:
        """True when a RocketMQ 5 field differs from its default."""
        return (
            self.consume_message_orderly
            or dict(self.group_retry_policy) != DEFAULT_RETRY_POLICY
            or self.group_sys_flag != 0
            or self.consume_timeout_minute != 15
            or bool(self.attributes)
        )

    def to_json(self, *, full: bool = False) -> dict[str, Any]:
        """RocketMQ's JSON of the group: the 4.x fields, and RocketMQ 5's as 5.3.2 writes them
        when `full` or when one of them is not its default (so an untouched group reads as a
        4.x broker wrote it)."""
        value: dict[str, Any] = {
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "groupName": self.group_name,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }
        if full or self.has_5x_fields():
            value |= {
                "attributes": dict(sorted(self.attributes.items())),
                "consumeMessageOrderly": self.consume_message_orderly,
                "consumeTimeoutMinute": self.consume_timeout_minute,
                "groupRetryPolicy": dict(self.group_retry_policy),
                "groupSysFlag": self.group_sys_flag,
            }
        return dict(sorted(value.items()))

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> SubscriptionGroup:
        # A null field keeps its default, as fastjson leaves a Java field it reads null for.
        def flag(key: str, default: bool) -> bool:
            raw = value.get(key)
            if raw is None:
                return default
            return raw if isinstance(raw, bool) else str(raw).lower() == "true"

        def number(key: str, default: int) -> int:
            raw = value.get(key)
            return default if raw is None else int(raw)

        return cls(
            str(value["groupName"]),
            flag("consumeEnable", True),
            flag("consumeFromMinEnable", True),
            flag("consumeBroadcastEnable", True),
            number("retryQueueNums", 1),
            number("retryMaxTimes", 16),
            number("brokerId", 0),
            number("whichBrokerWhenConsumeSlowly", 1),
            flag("notifyConsumerIdsChangedEnable", True),
            flag("consumeMessageOrderly", False),
            retry_policy_from_json(value.get("groupRetryPolicy")),
            number("groupSysFlag", 0),
            number("consumeTimeoutMinute", 15),
            _attributes(value.get("attributes")),
        )


def _attributes(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


SYSTEM_GROUPS = (
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
)


class SubscriptionGroups:
    def __init__(self, config_dir: Path, *, auto_create: bool) -> None:
        self.file = JsonTable(config_dir / "subscriptionGroup.json")
        self.auto_create = auto_create
        self.groups: dict[str, SubscriptionGroup] = {
            name: SubscriptionGroup(name, consume_broadcast_enable=True) for name in SYSTEM_GROUPS
        }
        self.data_version = DataVersion()

    def load(self) -> None:
        saved = self.file.load_json()
        if saved:
            for name, value in (saved.get("subscriptionGroupTable") or {}).items():
                self.groups[name] = SubscriptionGroup.from_json(value)
            self.data_version = DataVersion.from_json(saved.get("dataVersion"))

    def mirror(self, master: dict[str, Any]) -> bool:
        """A slave takes its master's groups whole (GET_ALL_SUBSCRIPTIONGROUP_CONFIG's body)
        when its data version differs; True when it changed."""
        version = DataVersion.from_json(master.get("dataVersion"))
        if version.to_json() == self.data_version.to_json():
            return False
        self.groups = {
            name: SubscriptionGroup.from_json(value)
            for name, value in (master.get("subscriptionGroupTable") or {}).items()
        }
        self.data_version = version
        return True

    def to_json(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json(),
            "subscriptionGroupTable": {n: g.to_json() for n, g in self.groups.items()},
        }

    def writer(self) -> Callable[[], bool]:
        """The write of subscriptionGroup.json as the table is now (see JsonTable.writer)."""
        return self.file.writer(self.to_json())

    def persist(self) -> None:
        """Write subscriptionGroup.json. Blocking."""
        self.writer()()

    def find(self, group: str) -> SubscriptionGroup | None:
        """The group's config, created with defaults if auto-creation is on."""
        found = self.groups.get(group)
        if found is None and self.auto_create:
            found = self.groups[group] = SubscriptionGroup(group)
            self.data_version.bump()
        return found

    def upsert(self, group: SubscriptionGroup) -> None:
        self.groups[group.group_name] = group
        self.data_version.bump()

    def delete(self, group: str) -> bool:
        if self.groups.pop(group, None) is None:
            return False
        self.data_version.bump()
        return True

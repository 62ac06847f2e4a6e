"""Topic configs (RocketMQ's TopicConfigManager): config/topics.json, system topics, and the
auto-creation of a topic from TBW102 when a producer sends to one that does not exist."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sidewinder.broker.attributes import MESSAGE_TYPE
from sidewinder.broker.config import PERM_INHERIT, PERM_READ, PERM_WRITE, BrokerConfig
from sidewinder.broker.metadata import JsonTable
from sidewinder.protocol.data_version import DataVersion
from sidewinder.protocol.message import reply_topic
from sidewinder.protocol.topics import AUTO_CREATE_TOPIC_KEY as AUTO_CREATE_TOPIC_KEY
from sidewinder.protocol.topics import FIXED_SYSTEM_TOPICS as FIXED_SYSTEM_TOPICS
from sidewinder.protocol.topics import OFFSET_MOVED_EVENT as OFFSET_MOVED_EVENT
from sidewinder.protocol.topics import SCHEDULE_TOPIC as SCHEDULE_TOPIC
from sidewinder.protocol.topics import SELF_TEST_TOPIC as SELF_TEST_TOPIC
from sidewinder.protocol.topics import SYSTEM_TOPIC_PREFIX as SYSTEM_TOPIC_PREFIX
from sidewinder.protocol.topics import TRANS_CHECK_MAX_TIME_TOPIC as TRANS_CHECK_MAX_TIME_TOPIC
from sidewinder.protocol.topics import TRANS_HALF_TOPIC as TRANS_HALF_TOPIC
from sidewinder.protocol.topics import TRANS_OP_HALF_TOPIC as TRANS_OP_HALF_TOPIC
from sidewinder.protocol.topics import is_fixed_system_topic

# RocketMQ 5's timer messages wait here (TimerMessageStore.TIMER_TOPIC), when timerWheelEnable.
TIMER_TOPIC = "rmq_sys_wheel_timer"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
DLQ_QUEUES_PER_GROUP = 1
TOPIC_NAME = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_LENGTH = 127


def topic_name_problem(topic: str) -> str:
    """Why RocketMQ would refuse this topic name ("" when it is fine)."""
    if not topic:
        return "The specified topic is blank."
    if not TOPIC_NAME.match(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return ""


def is_system_topic(topic: str, config: BrokerConfig | None = None) -> bool:
    """TopicValidator.isSystemTopic: a fixed system topic or rmq_sys_*; given a broker's
    `config`, also the ones its TopicConfigManager adds to the set (`system_topics`)."""
    if is_fixed_system_topic(topic):
        return True
    return config is not None and topic in _config_system_topics(config)


def system_topics(config: BrokerConfig) -> set[str]:
    """RocketMQ's TopicValidator system set as a broker of this config fills it: the fixed
    topics, the cluster and broker names, the trace topic when enabled, the reply topic, and
    RocketMQ 5's timer topic when the timer wheel is."""
    return set(FIXED_SYSTEM_TOPICS) | _config_system_topics(config)


def _config_system_topics(config: BrokerConfig) -> set[str]:
    names = {config.broker_cluster_name, config.broker_name}
    names.add(reply_topic(config.broker_cluster_name))
    if config.timer_wheel_enable:
        names.add(TIMER_TOPIC)
    if config.trace_topic_enable:
        names.add(config.msg_trace_topic_name)
    return names


@dataclass(frozen=True)
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    # RocketMQ 5's topic attributes ("message.type": "FIFO", ...), see broker/attributes.py. Out
    # of the repr, which refusal remarks quote: a 4.x client sees the remark it saw before.
    attributes: Mapping[str, str] = field(default_factory=dict, hash=False, repr=False)

    @property
    def message_type(self) -> str:
        """TopicConfig.getTopicMessageType: NORMAL unless the attribute says otherwise."""
        return self.attributes.get(MESSAGE_TYPE, "NORMAL")

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's TopicConfig JSON; `attributes` (RocketMQ 5) only when there are some, so
        a topic without them reads as a 4.x broker wrote it."""
        head = {"attributes": dict(sorted(self.attributes.items()))} if self.attributes else {}
        return head | {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> TopicConfig:
        return cls(
            str(value["topicName"]),
            int(value.get("readQueueNums", 16)),
            int(value.get("writeQueueNums", 16)),
            int(value.get("perm", PERM_READ | PERM_WRITE)),
            str(value.get("topicFilterType", "SINGLE_TAG")),
            int(value.get("topicSysFlag", 0)),
            bool(value.get("order", False)),
            _attributes(value.get("attributes")),
        )


def _attributes(value: Any) -> dict[str, str]:
    """A 5.x file's attribute map (none in a 4.x file)."""
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items()}


class TopicTable:
    def __init__(self, config: BrokerConfig, config_dir: Path) -> None:
        self.config = config
        self.file = JsonTable(config_dir / "topics.json")
        self.topics: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self._system_topics()

    def _system_topics(self) -> None:
        config = self.config
        self.topics[SELF_TEST_TOPIC] = TopicConfig(SELF_TEST_TOPIC, 1, 1)
        if config.auto_create_topic_enable:
            queues = config.default_topic_queue_nums
            self.topics[AUTO_CREATE_TOPIC_KEY] = TopicConfig(
                AUTO_CREATE_TOPIC_KEY, queues, queues, PERM_INHERIT | PERM_READ | PERM_WRITE
            )
        perm = PERM_INHERIT | (config.broker_permission if config.cluster_topic_enable else 0)
        self.topics[config.broker_cluster_name] = TopicConfig(
            config.broker_cluster_name, 16, 16, perm
        )
        perm = PERM_INHERIT | (config.broker_permission if config.broker_topic_enable else 0)
        self.topics[config.broker_name] = TopicConfig(config.broker_name, 1, 1, perm)
        self.topics[OFFSET_MOVED_EVENT] = TopicConfig(OFFSET_MOVED_EVENT, 1, 1)
        self.topics[SCHEDULE_TOPIC] = TopicConfig(SCHEDULE_TOPIC, 18, 18)
        replies = reply_topic(config.broker_cluster_name)  # request-reply (4.6+)
        self.topics[replies] = TopicConfig(replies, 1, 1)
        if config.trace_topic_enable:
            name = config.msg_trace_topic_name
            self.topics[name] = TopicConfig(name, 1, 1)
        if config.timer_wheel_enable:  # RocketMQ 5's TopicConfigManager: one queue, read-write
            self.topics[TIMER_TOPIC] = TopicConfig(TIMER_TOPIC, 1, 1)

    def load(self) -> None:
        saved = self.file.load_json()
        if saved:
            for name, value in (saved.get("topicConfigTable") or {}).items():
                self.topics[name] = TopicConfig.from_json(value)
            self.data_version = DataVersion.from_json(saved.get("dataVersion"))

    def mirror(self, master: dict[str, Any]) -> bool:
        """A slave takes its master's table whole (GET_ALL_TOPIC_CONFIG's body) when its data
        version differs; True when it changed."""
        version = DataVersion.from_json(master.get("dataVersion"))
        if version.to_json() == self.data_version.to_json():
            return False
        self.topics = {
            name: TopicConfig.from_json(value)
            for name, value in (master.get("topicConfigTable") or {}).items()
        }
        self.data_version = version
        return True

    def to_json(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json(),
            "topicConfigTable": {name: t.to_json() for name, t in self.topics.items()},
        }

    def writer(self) -> Callable[[], bool]:
        """The write of topics.json as the table is now (see JsonTable.writer)."""
        return self.file.writer(self.to_json())

    def persist(self) -> None:
        """Write topics.json. Blocking."""
        self.writer()()

    def get(self, topic: str) -> TopicConfig | None:
        return self.topics.get(topic)

    def upsert(self, topic: TopicConfig) -> None:
        self.topics[topic.topic_name] = topic
        self.data_version.bump()

    def delete(self, topic: str) -> bool:
        if self.topics.pop(topic, None) is None:
            return False
        self.data_version.bump()
        return True

    def create_for_send(
        self, topic: str, default_topic: str, queue_nums: int, sys_flag: int = 0
    ) -> TopicConfig | None:
        """createTopicInSendMessageMethod: a new topic shaped by an inheritable default topic."""
        existing = self.topics.get(topic)
        if existing is not None:
            return existing
        default = self.topics.get(default_topic)
        if default is None or not default.perm & PERM_INHERIT:
            return None
        if default_topic == AUTO_CREATE_TOPIC_KEY and not self.config.auto_create_topic_enable:
            return None
        queues = min(queue_nums, default.write_queue_nums)
        created = replace(
            default,
            topic_name=topic,
            read_queue_nums=max(queues, 0),
            write_queue_nums=max(queues, 0),
            perm=default.perm & ~PERM_INHERIT,
            topic_sys_flag=sys_flag,
            order=False,
            attributes={},
        )
        self.upsert(created)
        return created

    def create_retry_topic(self, topic: str, queue_nums: int) -> TopicConfig:
        """%RETRY%group (createTopicInSendMessageBackMethod)."""
        existing = self.topics.get(topic)
        if existing is not None:
            return existing
        created = TopicConfig(topic, queue_nums, queue_nums, PERM_READ | PERM_WRITE)
        self.upsert(created)
        return created

    def create_dlq_topic(self, group: str) -> TopicConfig:
        """%DLQ%group, with its one queue."""
        return self.create_retry_topic(f"{DLQ_GROUP_TOPIC_PREFIX}{group}", DLQ_QUEUES_PER_GROUP)

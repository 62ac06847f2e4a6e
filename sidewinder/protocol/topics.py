"""RocketMQ's system topic names (TopicValidator), shared by the broker and the gRPC front."""

from __future__ import annotations

AUTO_CREATE_TOPIC_KEY = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"  # MixAll.CID_RMQ_SYS_PREFIX

FIXED_SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY,
        SCHEDULE_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        "RMQ_SYS_TRACE_TOPIC",
        "BenchmarkTest",
    }
)


def is_fixed_system_topic(topic: str) -> bool:
    """One of TopicValidator's fixed system topics, or rmq_sys_*."""
    return topic in FIXED_SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)

"""The settings a client gets back, merged as RocketMQ's proxy merges them
(GrpcClientSettingsManager): the server's limits and the consumer group's own config."""

from __future__ import annotations

from typing import Any

from sidewinder.proxy import grpc_protocol as v2
from sidewinder.proxy.messaging import MessagingActivity


def consumer() -> Any:
    settings = v2.Settings(client_type=v2.ClientType.PUSH_CONSUMER)
    settings.subscription.group.name = "G"
    settings.subscription.subscriptions.add().topic.name = "T"
    return settings


def merged(settings: Any, group_config: dict[str, Any] | None = None) -> Any:
    return MessagingActivity(["127.0.0.1:1"], ("127.0.0.1", 0)).merge_settings(
        settings, group_config
    )


def test_a_producer_gets_the_servers_retry_policy_and_limits() -> None:
    producer = v2.Settings(client_type=v2.ClientType.PRODUCER)
    producer.publishing.topics.add().name = "T"
    got = merged(producer)
    assert got.backoff_policy.max_attempts == 3
    assert got.backoff_policy.exponential_backoff.initial.ToMilliseconds() == 10
    assert got.publishing.max_body_size == 4 << 20 and got.publishing.validate_message_type
    assert [t.name for t in got.publishing.topics] == ["T"]


def test_a_consumer_of_a_default_group() -> None:
    got = merged(consumer(), {})
    assert not got.subscription.fifo and got.subscription.receive_batch_size == 32
    assert got.backoff_policy.max_attempts == 17
    steps = [d.ToMilliseconds() for d in got.backoff_policy.customized_backoff.next]
    assert steps[:4] == [1000, 5000, 10000, 30000] and steps[-1] == 7_200_000


def test_a_consumer_of_an_orderly_group_with_an_exponential_policy() -> None:
    config = {
        "consumeMessageOrderly": True,
        "retryMaxTimes": 3,
        "groupRetryPolicy": {
            "type": "EXPONENTIAL",
            "exponentialRetryPolicy": {"initial": 2000, "max": 60000, "multiplier": 3},
        },
    }
    got = merged(consumer(), config)
    assert got.subscription.fifo
    assert got.backoff_policy.max_attempts == 4
    backoff = got.backoff_policy.exponential_backoff
    assert (backoff.initial.ToMilliseconds(), backoff.max.ToMilliseconds()) == (2000, 60000)
    assert backoff.multiplier == 3


def test_a_customized_policy_of_the_group() -> None:
    config = {
        "groupRetryPolicy": {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [500, 700]}}
    }
    got = merged(consumer(), config)
    assert [d.ToMilliseconds() for d in got.backoff_policy.customized_backoff.next] == [500, 700]

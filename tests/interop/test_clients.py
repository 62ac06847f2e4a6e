"""Each stock client produces and consumes against the target, and they read each other's messages.

Runs against every target kind: on RocketMQ these prove the drivers and the test; on Sidewinder
they prove the broker.
"""

from __future__ import annotations

import pytest

from interop.drivers import CLIENTS
from interop.mqadmin import create_topic
from interop.target import ClusterTarget
from tests.helpers import unique
from tests.interop.scenarios import (
    DEFAULT_PROPS,
    assert_received_all,
    assert_sent_well,
    consume,
    produce,
)

pytestmark = pytest.mark.interop

# The consume modes each client has (ali-ons has no pull consumer).
CONSUME_MODES = {
    "java": ("push", "pull"),
    "cpp": ("push", "pull"),
    "node": ("push",),
    "go": ("push", "pull"),
}


@pytest.mark.parametrize("client", CLIENTS)
def test_client_produces_1000_and_consumes_every_one(target: ClusterTarget, client: str) -> None:
    topic = unique(f"Interop_{client}")
    create_topic(target.namesrv_addr, topic)
    sent = produce(
        target,
        client,
        topic,
        1000,
        group=unique("PG"),
        tag="TagA",
        prop=DEFAULT_PROPS,
        body_size=200,
    )
    assert_sent_well(sent, count=1000, body_size=200)
    assert {e["queueId"] for e in sent if "queueId" in e} <= {0, 1, 2, 3}
    for mode in CONSUME_MODES[client]:
        run = consume(target, client, topic, 1000, group=unique(f"CG_{mode}"), mode=mode)
        assert_received_all(run, sent, topic=topic, tags="TagA", props=DEFAULT_PROPS)


CROSS = [("java", other) for other in CLIENTS if other != "java"] + [
    (other, "java") for other in CLIENTS if other != "java"
]


@pytest.mark.parametrize(("producer", "consumer"), CROSS, ids=[f"{p}-to-{c}" for p, c in CROSS])
def test_cross_client(target: ClusterTarget, producer: str, consumer: str) -> None:
    topic = unique(f"Cross_{producer}_{consumer}")
    create_topic(target.namesrv_addr, topic)
    sent = produce(
        target,
        producer,
        topic,
        200,
        group=unique("PG"),
        tag="TagX",
        prop=["origin=" + producer],
        keys_prefix=f"{producer}-",
    )
    assert_sent_well(sent, count=200, keys_prefix=f"{producer}-")
    run = consume(target, consumer, topic, 200, group=unique("CG"))
    assert_received_all(run, sent, topic=topic, tags="TagX", props=["origin=" + producer])
    if producer == "java":
        # Java stamps UNIQ_KEY and reports both ids; a consumer shows one of them as the msgId
        # (ali-ons always the broker's offsetMsgId, the others the UNIQ_KEY).
        origin = {e["keys"]: e for e in sent}
        for e in run.received():
            o = origin[e["keys"]]
            expected = o["offsetMsgId"] if consumer == "node" else o["msgId"]
            assert e["msgId"] == expected, (e, o)

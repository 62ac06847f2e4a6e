"""Stock clients sharing a consumer group, on every target: two members split the queues with no
overlap, the one left takes over from where the other committed, and committed offsets survive
a restart of the consumer and of the broker."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from interop.drivers import CLIENTS
from interop.target import ClusterTarget
from tests.helpers import unique
from tests.interop.scenarios import QUEUES, consume, killing, new_topic, produce_all, start_consumer

pytestmark = pytest.mark.interop
# ali-ons ignores NOTIFY_CONSUMER_IDS_CHANGED and rebalances on its timer only (every 2 s in the
# node driver); the others rebalance as soon as the broker tells them the group changed.
SETTLE_S = {"node": 5.0}
# Past two of the stock clients' periodic offset commits (persistConsumerOffsetInterval, 5 s):
# with one (6 s) the Go client against RocketMQ itself once restarted from older offsets. The
# node driver commits every 1 s (interop/drivers/node/driver.js), the Java driver synchronously
# before it leaves (interop/drivers/java).
OFFSETS_PERSISTED_S = {"java": 1.0, "node": 3.0}
DEFAULT_OFFSETS_PERSISTED_S = 11.0


def offsets_persisted_s(client: str) -> float:
    return OFFSETS_PERSISTED_S.get(client, DEFAULT_OFFSETS_PERSISTED_S)


@pytest.mark.parametrize("client", CLIENTS)
def test_two_members_split_then_one_takes_over(target: ClusterTarget, client: str) -> None:
    topic, group = new_topic(target, f"Split_{client}"), unique("SplitGroup")
    per_round = 10 * QUEUES  # the producers spread over the queues round-robin: 10 each
    # b stops after its half of round 1; a stays for the whole of round 2 as well. b lingers past
    # two periodic offset commits: the commit at shutdown is a oneway request, which a loaded
    # machine can lose, and then a would consume b's half again.
    a = start_consumer(
        target, client, topic, per_round // 2 + per_round, group=group, instance="a", timeout_s=150
    )
    b = start_consumer(
        target,
        client,
        topic,
        per_round // 2,
        group=group,
        instance="b",
        timeout_s=90,
        linger=offsets_persisted_s(client),
    )
    with killing(a, b):
        time.sleep(SETTLE_S.get(client, 3))  # both joined and rebalanced
        first = produce_all(target, client, topic, per_round, group=unique("PG"))
        run_b = b.wait().check()
        second = produce_all(target, client, topic, per_round, group=unique("PG"), start=per_round)
        run_a = a.wait().check()
    got_a, got_b = run_a.received(), run_b.received()
    first_keys = {e["keys"] for e in first}
    a_first = [e for e in got_a if e["keys"] in first_keys]
    queues_a = {e["queueId"] for e in a_first if "queueId" in e}
    queues_b = {e["queueId"] for e in got_b if "queueId" in e}
    assert len(got_b) == per_round // 2 and len(a_first) == per_round // 2
    assert not queues_a & queues_b, (queues_a, queues_b)
    counts = Counter(e["keys"] for e in got_a + got_b)
    assert set(counts) == first_keys | {e["keys"] for e in second}
    assert [k for k, n in counts.items() if n > 1] == []


@pytest.mark.parametrize("client", ["java", "go"])
def test_offsets_survive_consumer_and_broker_restarts(target: ClusterTarget, client: str) -> None:
    topic, group = new_topic(target, f"Resume_{client}"), unique("ResumeGroup")
    first = produce_all(target, client, topic, 20, group=unique("PG"))
    run = consume(target, client, topic, 20, group=group, linger=offsets_persisted_s(client))
    assert {e["keys"] for e in run.received()} == {e["keys"] for e in first}

    target.stop_broker()
    target.start_broker()
    second = produce_all(target, client, topic, 12, group=unique("PG"), start=20)
    # From the committed offsets: only the new twelve, none of the first twenty again.
    run = consume(target, client, topic, 12, group=group, linger=2)
    assert sorted(e["keys"] for e in run.received()) == sorted(e["keys"] for e in second)

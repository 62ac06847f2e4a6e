"""The stock RocketMQ 5.3.2 remoting client (rocketmq-client 5.3.2, through the Java driver built
against it) on both 5.x targets: the real 5.3.2 broker and Sidewinder.

Its producer in every send mode, transactions, delay levels and `setDeliverTimeMs`; its push
consumer (clustering, orderly, tag and SQL92 filters, retry), its lite pull consumer (which pulls
with LITE_PULL_MESSAGE), request-reply, and its push consumer in POP mode (the broker assigns the
queues and the client pops from them)."""

from __future__ import annotations

import pytest

from interop.drivers import JAVA5, run_driver
from interop.target import ClusterTarget
from tests.helpers import unique
from tests.interop.our_mqadmin import mqadmin as our_mqadmin
from tests.interop.scenarios import (
    DEFAULT_PROPS,
    assert_received_all,
    by_index,
    consume,
    killing,
    new_topic,
    produce_all,
    start_consumer,
    wait_with_arrivals,
)

pytestmark = pytest.mark.interop

CLOCK_SLACK_MS = 100  # born and store times are read from the same machine clock
# RocketMQ 5.3.2's timer files a deliver time under its second (timerPrecisionMs): a message
# can come up to that much before the time it asked for.
TIMER_PRECISION_MS = 1000
TIMER_LATE_MS = 2000  # the timer's one-second tick, and a slow shared machine


def test_every_send_mode_reaches_a_push_consumer(pop_target: ClusterTarget) -> None:
    topic = new_topic(pop_target, "J5Modes")
    sent: list[dict] = []
    for n, mode in enumerate(("sync", "async", "oneway", "batch")):
        sent += produce_all(
            pop_target, JAVA5, topic, 8, group=unique("PG"), mode=mode, start=8 * n,
            prop=DEFAULT_PROPS,
        )  # fmt: skip
    assert all(e["client"] == JAVA5 for e in sent)
    run = consume(pop_target, JAVA5, topic, len(sent), group=unique("CG"), linger=1)
    assert_received_all(run, sent, topic=topic, props=DEFAULT_PROPS)


def test_a_body_of_max_message_size_goes_through(pop_target: ClusterTarget) -> None:
    """The client sends a body of exactly maxMessageSize (4 MiB): RocketMQ 5 counts the limit
    against the body, so the larger record is stored (RocketMQ 4.9.7 refused it)."""
    topic = new_topic(pop_target, "J5Largest")
    sent = produce_all(
        pop_target, JAVA5, topic, 1, group=unique("PG"), body_size=4 << 20,
        compress_over=8 << 20,  # sent as it is, not zlib-compressed to a few KiB
    )  # fmt: skip
    run = consume(pop_target, JAVA5, topic, 1, group=unique("CG"))
    assert_received_all(run, sent, topic=topic)
    assert [e["bodyLen"] for e in run.received()] == [4 << 20]


def test_orderly_consumer_gets_each_queue_in_order(pop_target: ClusterTarget) -> None:
    topic = new_topic(pop_target, "J5Orderly")
    sent = produce_all(pop_target, JAVA5, topic, 24, group=unique("PG"), queue=1)
    run = consume(pop_target, JAVA5, topic, len(sent), group=unique("CG"), mode="orderly")
    assert_received_all(run, sent, topic=topic)
    offsets = [e["queueOffset"] for e in run.received()]
    assert offsets == sorted(offsets), offsets


def test_tag_and_sql_filters_deliver_only_what_matches(pop_target: ClusterTarget) -> None:
    topic = new_topic(pop_target, "J5Filter")
    by_tags = start_consumer(pop_target, JAVA5, topic, 6, group=unique("CG"), tags="TagA", linger=2)
    by_sql = start_consumer(
        pop_target, JAVA5, topic, 6, group=unique("CG"), sql="TAGS = 'TagA'", linger=2
    )
    with killing(by_tags, by_sql):
        group = unique("PG")
        wanted = produce_all(pop_target, JAVA5, topic, 6, group=group, tag="TagA")
        produce_all(pop_target, JAVA5, topic, 6, group=group, tag="TagB", start=6)
        for consumer in (by_tags, by_sql):
            assert_received_all(consumer.wait().check(), wanted, topic=topic, tags="TagA")


def test_reconsume_later_comes_back_through_the_retry_topic(pop_target: ClusterTarget) -> None:
    topic = new_topic(pop_target, "J5Retry")
    sent = produce_all(pop_target, JAVA5, topic, 10, group=unique("PG"))
    run = consume(
        pop_target, JAVA5, topic, 10, group=unique("CG"), reconsume_later=2, timeout_s=120
    )
    refused = [e for e in run.received(only_ok=False) if e["action"] == "later"]
    assert len(refused) == 2 and all(e["reconsumeTimes"] == 0 for e in refused), refused
    assert_received_all(run, sent, topic=topic)
    back = {e["keys"]: e for e in run.received()}
    assert all(back[e["keys"]]["reconsumeTimes"] == 1 for e in refused)


def test_lite_pull_reads_what_was_sent(pop_target: ClusterTarget) -> None:
    topic = new_topic(pop_target, "J5LitePull")
    sent = produce_all(pop_target, JAVA5, topic, 20, group=unique("PG"))
    run = consume(pop_target, JAVA5, topic, 20, group=unique("CG"), mode="lite-pull")
    assert_received_all(run, sent, topic=topic)


def test_transactions_commit_or_roll_back(pop_target: ClusterTarget) -> None:
    """Half messages of two producers, one committing and one rolling back after the broker's
    check: only the committed ones become readable."""
    topic = new_topic(pop_target, "J5Tx")
    runs = {
        answer: run_driver(
            JAVA5,
            "transact",
            namesrv=pop_target.namesrv_addr,
            topic=topic,
            group=unique("TXG"),
            count=6,
            answer=f"unknown-{answer}",
            keys_prefix=f"{answer}-",
            start=0 if answer == "commit" else 6,
            timeout_s=120,
        ).check()
        for answer in ("commit", "rollback")
    }
    for run in runs.values():
        assert {e["msgId"] for e in run.sent()} <= {e["msgId"] for e in run.of("checked")}
    # One plain message after the half messages: a consumer that got it and the committed
    # ones and nothing else saw every rolled-back message stay unread.
    marker = produce_all(pop_target, JAVA5, topic, 1, group=unique("PG"), start=100, queue=0)
    expected = by_index(runs["commit"].sent()) + marker
    received = consume(pop_target, JAVA5, topic, len(expected), group=unique("CG"), linger=2)
    # RocketMQ 5.3.2 on a loaded host may check a half message again before the op record of
    # its first commit is written, and commit it twice: at least once, as it documents.
    duplicates_ok = pop_target.kind == "rocketmq5"
    assert_received_all(received, expected, topic=topic, duplicates_ok=duplicates_ok)


def test_request_reply(pop_target: ClusterTarget) -> None:
    """With the callback form of request(): the 5.3.2 client's blocking request() counts its
    latch down when the send succeeds, so it fails at once with "wait reply message timeout"
    on any broker (apache/rocketmq#9292, fixed after 5.3.2), and its callback form is called
    with null at that moment before it is called with the reply (the driver waits for that)."""
    topic = new_topic(pop_target, "J5Request")
    replier = start_consumer(pop_target, JAVA5, topic, 5, group=unique("CG"), reply=True)
    run = run_driver(
        JAVA5, "request", namesrv=pop_target.namesrv_addr, topic=topic,
        group=unique("PG"), count=5, request_timeout=10, callback=True, timeout_s=120,
    ).check()  # fmt: skip
    replied = run.of("replied")
    assert [e["index"] for e in replied] == list(range(5))
    for event in replied:
        assert event["correlationId"] == event["requestCorrelationId"], event
        assert event["topic"] == f"{pop_target.cluster_name}_REPLY_TOPIC", event
        assert event["msgType"] == "reply", event
    assert len(replier.wait().check().of("answered")) == 5


def test_held_messages_arrive_on_time(pop_target: ClusterTarget) -> None:
    """A delay level and `setDeliverTimeMs`, each holding messages 3 s (the test brokers'
    messageDelayLevel is "1s 2s 3s ...", interop/rocketmq.py)."""
    hold_ms = 3000
    topic = new_topic(pop_target, "J5Held")
    proc = start_consumer(pop_target, JAVA5, topic, 8, group=unique("CG"), timeout_s=60)
    with killing(proc):
        group = unique("PG")
        sent = produce_all(pop_target, JAVA5, topic, 4, group=group, delay_level=3)
        sent += produce_all(
            pop_target, JAVA5, topic, 4, group=group, deliver_after_ms=hold_ms, start=4
        )
        run, seen = wait_with_arrivals(proc)
    assert_received_all(run.check(), sent, topic=topic)
    for event, seen_at in zip(run.events, seen, strict=True):
        if event.get("event") != "received":
            continue
        born = event["bornTimestamp"]
        assert seen_at * 1000 - born >= hold_ms - TIMER_PRECISION_MS - CLOCK_SLACK_MS, event
        assert event["storeTimestamp"] - born <= hold_ms + TIMER_LATE_MS, event


def test_a_push_consumer_in_pop_mode(pop_target: ClusterTarget) -> None:
    """setConsumeMode -m POP, then the 5.x push consumer with client rebalance off: the broker
    assigns it the queues (QUERY_ASSIGNMENT) and it pops, acks, and commits nothing itself."""
    topic, group = new_topic(pop_target, "J5Pop"), unique("CG")
    args = ["-c", pop_target.cluster_name, "-t", topic, "-g", group, "-m", "POP"]
    out = our_mqadmin(pop_target, "setConsumeMode", *args)
    assert "success" in out, out
    sent = produce_all(pop_target, JAVA5, topic, 20, group=unique("PG"))
    run = consume(pop_target, JAVA5, topic, 20, group=group, mode="pop", linger=2)
    assert_received_all(run, sent, topic=topic)

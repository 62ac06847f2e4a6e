"""The client features a RocketMQ user relies on, each through every stock client that offers it.

Send modes (async, oneway, batch), queue selection, delay levels, orderly consumption,
broadcasting, tag and SQL92 filters, reconsume-later retries, lite-pull seek, transactions and the
Java client's binary (ROCKETMQ) header encoding. The last scenario checks the bench itself: a
driver asked for a mode its client lacks says `unsupported` and exits 2.

Runs against every target kind: on RocketMQ these prove the drivers and the tests; on Sidewinder
they prove the broker.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

import pytest

from interop.drivers import CLIENTS, DriverRun, run_driver
from interop.mqadmin import create_topic
from interop.target import ClusterTarget
from tests.helpers import unique
from tests.interop.scenarios import (
    DEFAULT_PROPS,
    QUEUES,
    assert_received_all,
    assert_sent_well,
    by_index,
    consume,
    killing,
    new_topic,
    produce_all,
    start_consumer,
    wait_with_arrivals,
)

pytestmark = pytest.mark.interop


def positions(events: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """keys -> (queueId, queueOffset), for events that report both."""
    return {
        e["keys"]: (e["queueId"], e["queueOffset"])
        for e in events
        if "queueId" in e and "queueOffset" in e
    }


def assert_stored_where_sent(run: DriverRun, sent: list[dict[str, Any]]) -> None:
    """Each message is read back at the queue and offset its send result named."""
    got = positions(run.received())
    for key, where in positions(sent).items():
        assert got[key] == where, (key, where, got[key])


def per_queue(events: list[dict[str, Any]]) -> dict[int, list[int]]:
    """queueId -> the queue offsets in event order."""
    offsets: dict[int, list[int]] = defaultdict(list)
    for e in events:
        offsets[e["queueId"]].append(e["queueOffset"])
    return dict(offsets)


@pytest.fixture(scope="module", autouse=True)
def warm_broker(target: ClusterTarget) -> None:
    """Send some traffic first: a just-started broker runs cold (JIT, page cache).

    A cold broker can keep a burst of async or oneway sends in its queue past the 200 ms RocketMQ
    allows there and refuse them as busy; a refused oneway send is lost without a word.
    """
    topic = new_topic(target, "Warmup")
    produce_all(target, "java", topic, 400, group=unique("PG"), body_size=512)


# -- 1. send modes --------------------------------------------------------------------------------

SEND_MODES = [
    pytest.param(
        client,
        mode,
        id=f"{client}-{mode}",
    )
    for client, modes in (
        ("java", ("async", "oneway", "batch")),
        ("go", ("async", "oneway", "batch")),
        ("cpp", ("async", "oneway")),
    )
    for mode in modes
]
BATCH = 10


@pytest.mark.parametrize(("client", "mode"), SEND_MODES)
def test_send_mode_delivers_every_message(target: ClusterTarget, client: str, mode: str) -> None:
    topic = new_topic(target, f"Mode_{client}_{mode}")
    count = 100
    sent = produce_all(
        target,
        client,
        topic,
        count,
        group=unique("PG"),
        mode=mode,
        batch_size=BATCH if mode == "batch" else None,
        tag="TagM",
        prop=DEFAULT_PROPS,
        timeout_s=120,
    )
    assert_sent_well(sent, count=count)
    if mode == "oneway":
        assert {e["status"] for e in sent} == {"ONEWAY"}
        assert not positions(sent), "a oneway send has no result to report a queue from"
    else:
        assert {e["status"] for e in sent} == {"SEND_OK"}
    if mode == "batch":
        # One send result per batch: every message of a batch sits on one queue, in a run of
        # consecutive offsets in batch order.
        for first in range(0, count, BATCH):
            batch = sent[first : first + BATCH]
            assert len({e.get("queueId") for e in batch}) == 1, batch
            offsets = [e["queueOffset"] for e in batch]
            assert offsets == list(range(offsets[0], offsets[0] + len(batch))), offsets
    # A lost message shows as a consumer timeout: 60 s is ten times what 100 take here.
    run = consume(target, client, topic, count, group=unique("CG"), timeout_s=60)
    assert_received_all(run, sent, topic=topic, tags="TagM", props=DEFAULT_PROPS)
    assert_stored_where_sent(run, sent)


# -- 2. queue selection ---------------------------------------------------------------------------

QUEUE_SENDS = [
    pytest.param(client, mode, id=f"{client}-{mode}")
    for client, modes in (
        ("java", ("sync", "batch")),
        ("go", ("sync", "batch")),
        ("cpp", ("sync",)),
        ("node", ("sync",)),
    )
    for mode in modes
]


@pytest.mark.parametrize(("client", "mode"), QUEUE_SENDS)
def test_send_to_one_queue(target: ClusterTarget, client: str, mode: str) -> None:
    topic = new_topic(target, f"Queue_{client}_{mode}")
    count, queue = 40, 2
    sent = produce_all(
        target,
        client,
        topic,
        count,
        group=unique("PG"),
        mode=mode,
        queue=queue,
        batch_size=BATCH if mode == "batch" else None,
        timeout_s=120,
    )
    assert_sent_well(sent, count=count)
    assert {e["queueId"] for e in sent if "queueId" in e} <= {queue}
    # A fresh topic: all of them on one queue means that queue's offsets 0..count-1.
    assert sorted(e["queueOffset"] for e in sent) == list(range(count))
    run = consume(target, client, topic, count, group=unique("CG"), timeout_s=120)
    assert_received_all(run, sent, topic=topic)
    received = run.received()
    assert {e["queueId"] for e in received} == {queue}
    assert sorted(e["queueOffset"] for e in received) == list(range(count))
    assert_stored_where_sent(run, sent)


# -- 3. delay level -------------------------------------------------------------------------------

DELAY_LEVEL = 2  # the test broker's levels are 1s..18s: level L waits L seconds
CLOCK_SLACK_MS = 100  # born and store times are read from the same machine clock


@pytest.mark.parametrize("client", CLIENTS)
def test_delay_level_holds_messages_back(target: ClusterTarget, client: str) -> None:
    topic = new_topic(target, f"Delay_{client}")
    count = 20
    proc = start_consumer(target, client, topic, count, group=unique("CG"), timeout_s=120)
    with killing(proc):
        sent = produce_all(
            target,
            client,
            topic,
            count,
            group=unique("PG"),
            delay_level=DELAY_LEVEL,
            prop=DEFAULT_PROPS,
            timeout_s=120,
        )
        run, seen = wait_with_arrivals(proc)
    run.check()
    assert_sent_well(sent, count=count)
    assert_received_all(run, sent, topic=topic, props=DEFAULT_PROPS)
    hold_ms = DELAY_LEVEL * 1000 - CLOCK_SLACK_MS
    for e, seen_at in zip(run.events, seen, strict=True):
        if e.get("event") != "received":
            continue
        # Stored in the real topic (and so visible to consumers) only after the delay ...
        assert e["storeTimestamp"] - e["bornTimestamp"] >= hold_ms, e
        # ... and handed to the application no earlier either.
        assert seen_at * 1000 - e["bornTimestamp"] >= hold_ms, (e, seen_at)


# -- 4. orderly consumption -----------------------------------------------------------------------


@pytest.mark.parametrize("client", ["java", "go", "cpp"])
def test_orderly_consume_keeps_queue_order(target: ClusterTarget, client: str) -> None:
    topic = new_topic(target, f"Orderly_{client}")
    count, queue = 100, 1
    sent = produce_all(target, client, topic, count, group=unique("PG"), queue=queue)
    assert_sent_well(sent, count=count)
    run = consume(target, client, topic, count, group=unique("CG"), mode="orderly")
    assert_received_all(run, sent, topic=topic)
    received = run.received()
    assert [e["keys"] for e in received] == [f"k-{i}" for i in range(count)]
    assert {e["queueId"] for e in received} == {queue}
    offsets = [e["queueOffset"] for e in received]
    assert all(a < b for a, b in pairwise(offsets)), offsets


# -- 5. broadcasting ------------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_broadcasting_gives_every_consumer_everything(target: ClusterTarget, client: str) -> None:
    topic = new_topic(target, f"Broadcast_{client}")
    group, count = unique("CG"), 50
    procs = [
        start_consumer(
            target,
            client,
            topic,
            count,
            group=group,
            model="broadcasting",
            instance=f"bc{n}",
            timeout_s=120,
        )
        for n in (1, 2)
    ]
    with killing(*procs):
        sent = produce_all(target, client, topic, count, group=unique("PG"))
        runs = [proc.wait().check() for proc in procs]
    for run in runs:
        assert_received_all(run, sent, topic=topic)


# -- 6. tag filter --------------------------------------------------------------------------------


def assert_tags_as_sent(run: DriverRun, sent: list[dict[str, Any]]) -> None:
    tags = {e["keys"]: e["tags"] for e in sent}
    for e in run.received():
        assert e.get("tags") == tags[e["keys"]], e


@pytest.mark.parametrize("client", CLIENTS)
def test_tag_filter(target: ClusterTarget, client: str) -> None:
    topic = new_topic(target, f"Tags_{client}")
    count = 40
    sent_a = produce_all(
        target, client, topic, count, group=unique("PG"), tag="TagA", keys_prefix="a-"
    )
    sent_b = produce_all(
        target, client, topic, count, group=unique("PG"), tag="TagB", keys_prefix="b-"
    )
    # Every queue holds TagA messages before its TagB ones, so once all TagB arrived every TagA
    # was read past; the short linger catches one handed over late by a consume thread.
    run = consume(target, client, topic, count, group=unique("CG"), tags="TagB", linger=1)
    assert_received_all(run, sent_b, topic=topic, tags="TagB")
    run = consume(target, client, topic, 2 * count, group=unique("CG"), tags="TagA||TagB")
    assert_received_all(run, sent_a + sent_b, topic=topic)
    assert_tags_as_sent(run, sent_a + sent_b)


# -- 7. SQL92 filter ------------------------------------------------------------------------------


@pytest.mark.parametrize("client", ["java", "go", "node"])
def test_sql92_filter(target: ClusterTarget, client: str) -> None:
    topic = new_topic(target, f"Sql_{client}")
    count = 40
    sent_1 = produce_all(
        target, client, topic, count, group=unique("PG"), prop=["a=1"], keys_prefix="one-"
    )
    produce_all(target, client, topic, count, group=unique("PG"), prop=["a=2"], keys_prefix="two-")
    run = consume(target, client, topic, count, group=unique("CG"), sql="a = '1'", linger=1)
    assert_received_all(run, sent_1, topic=topic, props=["a=1"])


# -- 8. reconsume later ---------------------------------------------------------------------------


# The C++ core hands its listener a whole pull result (up to 32 messages) whatever the batch size
# setting, and its C API stops at the first refused message: RECONSUME_LATER then sends back the
# whole batch, so messages the listener never saw come back (reconsumeTimes 1) as well.
SENDS_BACK_WHOLE_PULL = {"cpp"}


@pytest.mark.parametrize("client", CLIENTS)
def test_reconsume_later_redelivers_through_retry(target: ClusterTarget, client: str) -> None:
    topic = new_topic(target, f"Retry_{client}")
    count, later = 20, 2
    sent = produce_all(target, client, topic, count, group=unique("PG"), prop=DEFAULT_PROPS)
    group = unique("CG")
    if client in ("go", "cpp"):
        # The Go client looks up a topic's route only at start and every 30 s (not settable),
        # the C++ core at start and at each rebalance (every 10 s): the group's retry topic,
        # which its first heartbeat makes, would wait for the next look. Made beforehand, as a
        # group that consumed before has it (java and node still find the one the heartbeat
        # made).
        create_topic(target.namesrv_addr, f"%RETRY%{group}", queues=1)
    run = consume(target, client, topic, count, group=group, reconsume_later=later, timeout_s=120)
    refused = [e for e in run.received(only_ok=False) if e["action"] == "later"]
    assert len(refused) == later, run.describe()
    assert len({e["keys"] for e in refused}) == later, refused
    assert all(e["reconsumeTimes"] == 0 for e in refused), refused
    # Every message is accepted exactly once, with its body and properties, under its own topic.
    assert_received_all(run, sent, topic=topic, props=DEFAULT_PROPS)
    ok = {e["keys"]: e for e in run.received()}
    for e in refused:
        back = ok[e["keys"]]
        assert back["reconsumeTimes"] == 1, back
        assert back["bodyMd5"] == e["bodyMd5"], (back, e)
    retried = {e["keys"] for e in refused}
    again = [e for k, e in ok.items() if k not in retried and e["reconsumeTimes"] != 0]
    if client in SENDS_BACK_WHOLE_PULL:
        assert all(e["reconsumeTimes"] == 1 for e in again), again
    else:
        assert not again, again


# -- 9. lite pull with seek -----------------------------------------------------------------------


def test_lite_pull_seek_reads_from_the_offset(target: ClusterTarget) -> None:
    topic = new_topic(target, "LitePull")
    count, seek = 80, 5
    sent = produce_all(target, "java", topic, count, group=unique("PG"))
    wanted = [e for e in sent if e["queueOffset"] >= seek]
    assert len(per_queue(sent)) == QUEUES and len(wanted) < count
    run = consume(
        target,
        "java",
        topic,
        len(wanted),
        group=unique("CG"),
        mode="lite-pull",
        seek=seek,
        linger=1,
    )
    assert_received_all(run, wanted, topic=topic)
    assert_stored_where_sent(run, wanted)
    for queue, offsets in per_queue(run.received()).items():
        assert offsets == list(range(seek, seek + len(offsets))), (queue, offsets)


# -- 10. transactions -----------------------------------------------------------------------------

TRANSACTIONS = [
    pytest.param(client, answer, id=f"{client}-{answer}")
    for client in ("java", "go")
    for answer in ("commit", "rollback", "unknown-commit", "unknown-rollback")
]
LOCAL_STATE = {"commit": "COMMIT_MESSAGE", "rollback": "ROLLBACK_MESSAGE"}


def check_answer(event: dict[str, Any]) -> str:
    return str(event["answer"])


def assert_topic_holds_only_sentinels(target: ClusterTarget, topic: str) -> None:
    """Nothing but a sentinel per queue, written after everything else, is readable.

    The pull consumer reads every queue in offset order, so reaching the sentinel of every queue
    proves nothing was stored before it: the negative check ends when the sentinels arrive.
    """
    group = unique("PG")
    # Round robin puts one on every queue; a queue it missed (a resent send) gets one of its own.
    sentinels = produce_all(target, "java", topic, QUEUES, group=group, keys_prefix="sentinel-")
    for queue in sorted(set(range(QUEUES)) - {e["queueId"] for e in sentinels}):
        sentinels += produce_all(
            target,
            "java",
            topic,
            1,
            group=group,
            keys_prefix="sentinel-",
            start=QUEUES + queue,
            queue=queue,
        )
    assert {e["queueId"] for e in sentinels} == set(range(QUEUES)), sentinels
    run = consume(target, "java", topic, QUEUES, group=unique("CG"), mode="pull")
    assert_received_all(run, sentinels, topic=topic)


@pytest.mark.parametrize(("client", "answer"), TRANSACTIONS)
def test_transaction(target: ClusterTarget, client: str, answer: str) -> None:
    topic = new_topic(target, f"Tx_{client}_{answer.replace('-', '_')}")
    count = 20
    run = run_driver(
        client,
        "transact",
        namesrv=target.namesrv_addr,
        topic=topic,
        group=unique("TXG"),
        count=count,
        answer=answer,
        prop=DEFAULT_PROPS,
        timeout_s=120,
    ).check()
    sent = by_index(run.sent())
    assert len(sent) == count, run.describe()
    assert_sent_well(sent, count=count)
    assert {e["status"] for e in sent} == {"SEND_OK"}
    assert {e["localState"] for e in sent} == {LOCAL_STATE.get(answer, "UNKNOW")}
    outcome = answer.rsplit("-", 1)[-1]
    if answer.startswith("unknown-"):
        # The broker asks the producer about every undecided half message.
        checked = run.of("checked")
        assert {e["msgId"] for e in sent} <= {e["msgId"] for e in checked}, run.describe()
        assert {check_answer(e) for e in checked} == {outcome}, checked
    if outcome == "commit":
        received = consume(target, client, topic, count, group=unique("CG"), timeout_s=120)
        assert_received_all(received, sent, topic=topic, props=DEFAULT_PROPS)
    else:
        assert_topic_holds_only_sentinels(target, topic)


# -- 11. the Java client's binary header encoding -------------------------------------------------


def test_java_rocketmq_serialization(target: ClusterTarget) -> None:
    topic = new_topic(target, "SerializeRocketmq")
    count = 100
    sent = produce_all(
        target,
        "java",
        topic,
        count,
        group=unique("PG"),
        serialize="rocketmq",
        tag="TagR",
        prop=DEFAULT_PROPS,
    )
    assert_sent_well(sent, count=count)
    for mode in ("push", "pull"):
        run = consume(
            target, "java", topic, count, group=unique("CG"), mode=mode, serialize="rocketmq"
        )
        assert_received_all(run, sent, topic=topic, tags="TagR", props=DEFAULT_PROPS)
        assert_stored_where_sent(run, sent)


# -- 12. the bench: a mode a client lacks is refused, never faked ---------------------------------

UNSUPPORTED = [
    pytest.param("java", "consume", {"mode": "lite-pull", "sql": "a = '1'"}, id="java-lite-sql"),
    pytest.param("java", "transact", {"mode": "batch", "answer": "commit"}, id="java-tx-batch"),
    pytest.param("go", "consume", {"mode": "lite-pull"}, id="go-lite-pull"),
    pytest.param("go", "transact", {"mode": "async", "answer": "commit"}, id="go-tx-async"),
    pytest.param("cpp", "produce", {"mode": "batch"}, id="cpp-batch"),
    pytest.param("cpp", "consume", {"sql": "a = '1'"}, id="cpp-sql"),
    pytest.param("cpp", "transact", {"answer": "commit"}, id="cpp-transact"),
    pytest.param("node", "produce", {"mode": "batch"}, id="node-batch"),
    pytest.param("node", "produce", {"queue": 0}, id="node-queue-0"),
    pytest.param("node", "consume", {"mode": "orderly"}, id="node-orderly"),
    pytest.param("node", "transact", {"answer": "commit"}, id="node-transact"),
]


@pytest.mark.parametrize(("client", "action", "options"), UNSUPPORTED)
def test_driver_refuses_unsupported_mode(
    target: ClusterTarget, client: str, action: str, options: dict[str, Any]
) -> None:
    # Refused before the client connects: no topic needed.
    amount = {"expect": 1} if action == "consume" else {"count": 1}
    run = run_driver(
        client,
        action,
        namesrv=target.namesrv_addr,
        topic=unique(f"Unsupported_{client}"),
        group=unique("UG"),
        timeout_s=60,
        **amount,
        **options,
    )
    assert run.returncode == 2, run.describe()
    assert run.events and run.events[-1].get("event") == "error", run.describe()
    assert run.events[-1].get("error") == "unsupported", run.describe()
    assert not run.sent() and not run.received(only_ok=False), run.describe()
    assert not run.junk, run.describe()

"""Our mqadmin's consumer-group sub-commands (tools/mqadmin/consumers.py, consumerProgress's
Consume TPS) beside RocketMQ's own tool on every target, with a stock Java consumer online and with
none."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

from interop.mqadmin import create_topic
from interop.mqadmin import mqadmin as rocketmq_mqadmin
from interop.offsets import commit_offsets, wait_committed
from interop.target import ClusterTarget
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import unique
from tests.interop.admin_queries import committed
from tests.interop.our_mqadmin import mqadmin, ours_failing, ours_run
from tests.interop.scenarios import consume, produce, start_consumer

pytestmark = pytest.mark.interop


def _section(out: str, title: str) -> list[str]:
    """The lines of one #...# section of a running info, up to the blank line after it."""
    lines = out.split("\n")
    start = lines.index(title) + 1
    end = lines.index("", start)
    return lines[start:end]


def test_online_group(target: ClusterTarget) -> None:
    """consumerConnection, consumerStatus (-i), consumerProgress's TPS line, then a
    resetOffsetByTime the Java consumer obeys."""
    ns, topic, group = target.namesrv_addr, unique("OurGrpTopic"), unique("OurGrp")
    create_topic(ns, topic, queues=2)
    before_ms = int(time.time() * 1000) - 1000
    sent = produce(target, "java", topic, 6, group=unique("PG"))
    consumer = start_consumer(target, "java", topic, 12, group=group, timeout_s=150)
    try:
        consumer.wait_for("received", 6, timeout_s=60)
        ours = mqadmin(target, "consumerConnection", "-g", group)
        theirs = rocketmq_mqadmin(ns, "consumerConnection", "-g", group).stdout
        assert ours.strip().split("\n") == theirs.strip().split("\n"), (ours, theirs)
        (client_id,) = re.findall(r"^(\S+@\S+)\s", ours, re.M)

        ours = mqadmin(target, "consumerStatus", "-g", group)
        theirs = rocketmq_mqadmin(ns, "consumerStatus", "-g", group).stdout
        assert re.search(rf"^1\s+{re.escape(client_id)}\s+V4_9_8\s+\d+/", ours, re.M), ours
        tail = ours.split("\n")[2:]
        assert tail == theirs.split("\n")[2 : 2 + len(tail)], (ours, theirs)
        assert "Rebalance OK" in ours, ours

        ours = mqadmin(target, "consumerStatus", "-g", group, "-i", client_id)
        theirs = rocketmq_mqadmin(ns, "consumerStatus", "-g", group, "-i", client_id).stdout
        for title in ("#Consumer Subscription#", "#Consumer Offset#"):
            assert _section(ours, title)[:1] == _section(theirs, title)[:1], title
        assert _section(ours, "#Consumer Subscription#") == _section(
            theirs, "#Consumer Subscription#"
        )
        keys = [line.split(":")[0].strip() for line in _section(ours, "#Consumer Properties#")]
        wanted = [line.split(":")[0].strip() for line in _section(theirs, "#Consumer Properties#")]
        assert sorted(keys) == sorted(wanted), (keys, wanted)
        # The consumer is idle (6 of 6 received): its committed offsets hold still.
        assert _section(ours, "#Consumer Offset#") == _section(theirs, "#Consumer Offset#")
        detail = [line.split()[:3] for line in _section(ours, "#Consumer MQ Detail#")]
        assert detail == [line.split()[:3] for line in _section(theirs, "#Consumer MQ Detail#")]
        # The topic's two queues; the retry queue comes with the client's next route refresh
        # (up to 30 s after the broker makes the retry topic), on both targets alike.
        assert [row for row in detail if row[0] == topic] == [
            [topic, target.broker_name, "0"],
            [topic, target.broker_name, "1"],
        ], ours

        # The Java driver's consumer commits every second what it knows then (the client's own
        # periodic commit): a first commit may name only the %RETRY% queue, the topic's two
        # come with a later one.
        def both_queues_settled(out: str) -> bool:
            rows = [line for line in out.splitlines() if line.startswith(topic)]
            return len(rows) == 2 and "Diff Total: 0" in out

        ours = ours_until(target, both_queues_settled, "consumerProgress", "-g", group)
        theirs = rocketmq_mqadmin(ns, "consumerProgress", "-g", group).stdout
        for out in (ours, theirs):
            tps, total = out.rstrip("\n").split("\n")[-2:]
            assert re.fullmatch(r"Consume TPS: \d+\.\d\d", tps), out
            assert total == "Diff Total: 0", out

        args = ["-g", group, "-t", topic, "-s", str(before_ms)]
        out = ours_until(target, lambda out: "rollback" in out, "resetOffsetByTime", *args)
        assert out.startswith(
            f"rollback consumer offset by specified group[{group}], topic[{topic}], force[true], "
            f"timestamp(string)[{before_ms}], timestamp(long)[{before_ms}]\n#brokerName"
        ), out
        rows = [line.split() for line in out.splitlines() if line.startswith(target.broker_name)]
        assert sorted((int(r[1]), int(r[2])) for r in rows) == [(0, 0), (1, 0)], out
        run = consumer.wait()
    finally:
        consumer.kill()
    keys = sorted(e["keys"] for e in run.received())
    assert keys == sorted([e["keys"] for e in sent] * 2), run.describe()


def ours_until(
    target: ClusterTarget, ready: Callable[[str], bool], *args: str, seconds: float = 30
) -> str:
    """Our tool again until it succeeds and its output is `ready`: a group's first commits take
    the consumer a few seconds to send, and until then consumerProgress fails (as
    RocketMQ's) and a reset finds no offsets."""
    deadline = time.monotonic() + seconds
    while True:
        done = ours_run(target, *args)
        if done.returncode == 0 and ready(done.stdout):
            return done.stdout
        assert time.monotonic() < deadline, done.stdout + done.stderr
        time.sleep(1)


def _offline_group(target: ClusterTarget, topic: str) -> str:
    group = unique("OurOffGrp")
    consume(target, "java", topic, 4, group=group)
    # Both groups must be in the same state, two consumed of each queue. Under load the Java
    # consumer has lost every commit of one queue (on RocketMQ): what it left out is committed
    # here as it would have, once no commit of its can still be on its way.
    wait_committed(
        target.broker_addr, group, topic, queues=2, total=4, timeout_s=10, required=False
    )
    commit_offsets(target.broker_addr, group, topic, {0: 2, 1: 2})
    return group


def test_offline_group_resets_skips_and_clones(target: ClusterTarget) -> None:
    """Two groups in the same state (4 consumed, 6 more sent): RocketMQ's tool resets one,
    ours the other, and both print the same rollback figures and leave the same offsets."""
    ns, topic = target.namesrv_addr, unique("OurOffTopic")
    create_topic(ns, topic, queues=2)
    produce(target, "java", topic, 4, group=unique("PG"))
    theirs_group, ours_group = _offline_group(target, topic), _offline_group(target, topic)
    produce(target, "java", topic, 6, group=unique("PG"), start=4)

    def figures(out: str) -> list[list[str]]:
        return sorted(
            line.split() for line in out.splitlines() if line.startswith(target.broker_name)
        )

    for command, extra in (("skipAccumulatedMessage", []), ("resetOffsetByTime", ["-s", "0"])):
        theirs = rocketmq_mqadmin(ns, command, "-g", theirs_group, "-t", topic, *extra).stdout
        ours = mqadmin(target, command, "-g", ours_group, "-t", topic, *extra)
        assert figures(ours) == figures(theirs), (ours, theirs)
        assert [line for line in ours.splitlines() if line.startswith("#")] == [
            line for line in theirs.splitlines() if line.startswith("#")
        ], ours
        assert len(figures(ours)) == 2, ours
    assert ours.startswith(
        f"rollback consumer offset by specified consumerGroup[{ours_group}], topic[{topic}], "
        "force[true], timestamp(string)[0], timestamp(long)[0]\n"
    ), ours

    client = SyncRemotingClient()
    try:
        copies = unique("OurCloneA"), unique("OurCloneB")
        ours = mqadmin(target, "cloneGroupOffset", "-s", ours_group, "-d", copies[0], "-t", topic)
        theirs = rocketmq_mqadmin(
            ns, "cloneGroupOffset", "-s", ours_group, "-d", copies[1], "-t", topic
        ).stdout
        assert ours == theirs.replace(copies[1], copies[0]), (ours, theirs)
        for queue in (0, 1):
            source = committed(client, target, ours_group, topic, queue)
            assert committed(client, target, copies[0], topic, queue) == source
            assert committed(client, target, copies[1], topic, queue) == source
    finally:
        client.close()
    nobody = unique("OurNoClone")
    out = ours_failing(target, "cloneGroupOffset", "-s", nobody, "-d", "x", "-t", topic)
    assert f"%RETRY%{nobody}" in out, out
    out = ours_failing(target, "resetOffsetByTime", "-g", unique("Never"), "-t", topic, "-s", "now")
    assert "not exist" in out, out
    out = ours_failing(target, "consumerConnection", "-g", ours_group)
    assert "206" in out or "not online" in out, out

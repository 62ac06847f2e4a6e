"""Our mqadmin's message sub-commands (tools/mqadmin/messages.py, allocateMQ) beside RocketMQ's
own tool on every target: the same lines, the same figures where they are deterministic."""

from __future__ import annotations

import json
import re

import pytest

from interop.mqadmin import create_topic
from interop.mqadmin import mqadmin as rocketmq_mqadmin
from interop.target import ClusterTarget
from sidewinder.client.producer import Message
from sidewinder.client.sync import Producer
from tests.helpers import unique
from tests.interop.admin_queries import message_rows
from tests.interop.our_mqadmin import mqadmin, ours_failing
from tests.interop.scenarios import produce

pytestmark = pytest.mark.interop

FIELD_LINE = re.compile(r"^([A-Z][\w ]+:)\s+(.*)$", re.M)
# MessageExt's fields in printMsg lines that both tools must print alike (not the hosts'
# ports, which RocketMQ's tool prints as it resolved them).
EXT_FIELDS = re.compile(
    r"\b(brokerName|queueId|storeSize|queueOffset|sysFlag|bornTimestamp|storeTimestamp|msgId|"
    r"commitLogOffset|bodyCRC|reconsumeTimes|preparedTransactionOffset|flag)=([^,\]]*)"
)


def ext_fields(out: str) -> list[list[tuple[str, str]]]:
    return [EXT_FIELDS.findall(line) for line in out.splitlines() if line.startswith("MSGID: ")]


def properties_of(line: str) -> dict[str, str]:
    found = re.search(r"properties=\{([^}]*)\}", line)
    assert found, line
    return dict(p.split("=", 1) for p in found.group(1).split(", "))


def test_print_msg_and_by_queue(target: ClusterTarget) -> None:
    topic, ns = unique("OurPrintTopic"), target.namesrv_addr
    create_topic(ns, topic, queues=2)
    sent = produce(target, "java", topic, 5, group=unique("PG"), keys_prefix="op-", tag="TagO")

    ours = mqadmin(target, "printMsg", "-t", topic, "-d", "true")
    theirs = rocketmq_mqadmin(ns, "printMsg", "-t", topic, "-d", "true").stdout
    heads = r"^minOffset=\d+, maxOffset=\d+, MessageQueue \[.*\]$"
    assert re.findall(heads, ours, re.M) == re.findall(heads, theirs, re.M), ours
    assert ext_fields(ours) == ext_fields(theirs), ours
    assert message_rows(ours) == message_rows(theirs), ours
    assert sorted(r["msgId"] for r in message_rows(ours)) == sorted(e["msgId"] for e in sent)
    finished = r"print msg finished\. status=\w+, offset=\d+$"
    assert re.findall(finished, ours, re.M) == re.findall(finished, theirs, re.M), ours
    assert ours.count("-" * 56) == 2, ours
    # Message's properties, in the same (HashMap) order.
    for mine, theirs_line in zip(ours.splitlines(), theirs.splitlines(), strict=False):
        if mine.startswith("MSGID: "):
            assert list(properties_of(mine)) == list(properties_of(theirs_line)), mine

    # A filter that matches nothing: RocketMQ's "no matched msg" lines, then the end.
    args = ["-t", topic, "-s", "NoSuchTag"]
    ours = mqadmin(target, "printMsg", *args)
    theirs = rocketmq_mqadmin(ns, "printMsg", *args).stdout
    assert ours.splitlines() == theirs.splitlines(), ours

    queue = sent[0]["queueId"]
    args = ["-t", topic, "-a", target.broker_name, "-i", str(queue), "-p", "true", "-f", "true"]
    ours = mqadmin(target, "printMsgByQueue", *args)
    theirs = rocketmq_mqadmin(ns, "printMsgByQueue", *args).stdout
    assert message_rows(ours) == message_rows(theirs), ours
    assert all(r["body"] == "NOT PRINT BODY" for r in message_rows(ours)), ours
    count = sum(1 for e in sent if e["queueId"] == queue)
    assert re.search(rf"^Tag: TagO\s+Count: {count}$", ours, re.M), ours
    assert ours.splitlines()[-1] == theirs.strip().splitlines()[-1], ours
    args = ["-t", topic, "-a", target.broker_name, "-i", str(queue)]
    assert mqadmin(target, "printMsgByQueue", *args).strip() == ""


def test_query_by_unique_key_and_allocate(target: ClusterTarget) -> None:
    topic, ns = unique("OurUniqTopic"), target.namesrv_addr
    create_topic(ns, topic, queues=3)
    sent = produce(target, "java", topic, 4, group=unique("PG"), keys_prefix="ou-", tag="TagU")
    wanted = sent[2]
    ours = mqadmin(target, "queryMsgByUniqueKey", "-t", topic, "-i", wanted["msgId"])
    theirs = rocketmq_mqadmin(ns, "queryMsgByUniqueKey", "-t", topic, "-i", wanted["msgId"])
    fields, reference = dict(FIELD_LINE.findall(ours)), dict(FIELD_LINE.findall(theirs.stdout))
    for label in ("Topic:", "Tags:", "Keys:", "Queue ID:", "Queue Offset:", "CommitLog Offset:"):
        assert fields[label] == reference[label], (label, ours)
    for label in ("Reconsume Times:", "Born Timestamp:", "Store Timestamp:", "System Flag:"):
        assert fields[label] == reference[label], (label, ours)
    assert fields["Keys:"] == f"[{wanted['keys']}]", ours
    assert fields["Message Body Path:"] == reference["Message Body Path:"], ours
    assert ours.rstrip().endswith("WARN: No Consumer"), ours

    nothing = ["-t", topic, "-i", "0A0B0C0D" + "0" * 24]
    done = ours_failing(target, "queryMsgByUniqueKey", *nothing)
    assert "no message" in done, done

    for clients in ("127.0.0.1@a,127.0.0.1@b", "c1,c2,c3,c4", "only"):
        ours = mqadmin(target, "allocateMQ", "-t", topic, "-i", clients)
        theirs = rocketmq_mqadmin(ns, "allocateMQ", "-t", topic, "-i", clients).stdout
        # The same queues to the same clients: the tool's HashSet order reproduced.
        assert json.loads(ours) == json.loads(theirs), (ours, theirs)
        assert ours.strip() == theirs.strip()


def test_query_message_trace(target: ClusterTarget) -> None:
    """The trace test_mqadmin_commands writes, read by both tools: the same table."""
    topic, traces, ns = unique("OurTracedTopic"), unique("OurTraceTopic"), target.namesrv_addr
    create_topic(ns, topic, queues=1)
    create_topic(ns, traces, queues=1)
    with Producer(unique("TracePG"), ns) as producer:
        sent = producer.send(Message(topic, b"traced", tags="TagT", keys=["tk"]))
        msg_id = sent.msg_id
        pub = ["Pub", "1700000000000", "DefaultRegion", "TracePG", topic, msg_id, "TagT", "tk"]
        pub += ["127.0.0.1:10911", "6", "3", "0", sent.offset_msg_id, "true"]
        sub = ["SubAfter", "req1", msg_id, "12", "false", "tk", "0", "1700000001000", "CG1"]
        sub2 = ["SubAfter", "req2", msg_id, "7", "true", "tk", "0", "1700000002000", "CG2"]
        data = "".join("\x01".join(ctx) + "\x02" for ctx in (pub, sub, sub2))
        producer.send(Message(traces, data.encode(), keys=[msg_id, "tk"]))

    ours = mqadmin(target, "queryMsgTraceById", "-i", msg_id, "-t", traces)
    theirs = rocketmq_mqadmin(ns, "queryMsgTraceById", "-i", msg_id, "-t", traces).stdout
    assert ours.split("\n") == theirs.split("\n"), (ours, theirs)
    assert "failed" in ours and "12ms" in ours, ours

    done = ours_failing(target, "queryMsgTraceById", "-i", "NOPE0000", "-t", traces)
    assert "no message" in done, done
    done = ours_failing(target, "queryMsgTraceById", "-i", msg_id)
    assert "RMQ_SYS_TRACE_TOPIC" in done, done

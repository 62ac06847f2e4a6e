"""RocketMQ's own mqadmin, the sub-commands no other file checks, on every target: the same
outcome (success or failure, what it prints, the figures where they are deterministic) from
Sidewinder as from RocketMQ. tests/interop/test_mqadmin_coverage.py lists which test covers each
of the tool's 56 sub-commands."""

from __future__ import annotations

import json
import re

import pytest

from interop.mqadmin import MQAdminResult, create_topic, mqadmin, mqadmin_until
from interop.offsets import settle_consumed_group
from interop.target import ClusterTarget
from sidewinder.client.producer import Message
from sidewinder.client.sync import Producer
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import unique
from tests.interop.admin_queries import committed, message_rows, route_perm
from tests.interop.our_mqadmin import ours_run
from tests.interop.scenarios import consume, produce

pytestmark = pytest.mark.interop


def failed(result: MQAdminResult, code: int, remark: str = "") -> bool:
    """The tool's trace for a request the server refused with `code` (and `remark`)."""
    found = re.search(r"CODE: (\d+)\s+DESC: (.*)", result.output)
    return bool(found) and int(found.group(1)) == code and remark in found.group(2)  # type: ignore[union-attr]


def test_topic_perm_cluster_and_order_conf(target: ClusterTarget) -> None:
    """updateTopicPerm, topicClusterList, updateTopic -o, updateOrderConf."""
    topic, ns, broker = unique("PermTopic"), target.namesrv_addr, target.broker_addr
    create_topic(ns, topic, queues=2)

    out = mqadmin(ns, "updateTopicPerm", "-t", topic, "-p", "4", "-b", broker).stdout
    assert f"update topic perm from 6 to 4 in {broker} success." in out, out
    assert (
        f"TopicConfig [topicName={topic}, readQueueNums=2, writeQueueNums=2, perm=R--, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]." in out
    ), out
    assert route_perm(target, topic) == 4
    out = mqadmin(ns, "updateTopicPerm", "-t", topic, "-p", "4", "-b", broker).stdout
    assert out.strip() == "new perm equals to the old one!", out
    out = mqadmin(ns, "updateTopicPerm", "-t", topic, "-p", "6", "-c", target.cluster_name)
    assert f"update topic perm from 4 to 6 in {broker} success." in out.stdout, out
    assert route_perm(target, topic) == 6

    assert mqadmin(ns, "topicClusterList", "-t", topic).stdout.split() == [target.cluster_name]
    missing = unique("NoClusterTopic")
    out = mqadmin(ns, "topicClusterList", "-t", missing, check=False)
    assert failed(out, ResponseCode.TOPIC_NOT_EXIST, missing), out.output

    ordered = unique("OrderTopic")
    args = ["-c", target.cluster_name, "-t", ordered, "-o", "true", "-r", "2", "-w", "2"]
    out = mqadmin(ns, "updateTopic", *args).stdout
    assert f"set cluster orderConf. isOrder=true, orderConf=[{target.broker_name}:2]" in out
    conf = f"{target.broker_name}:2"
    got = mqadmin(ns, "updateOrderConf", "-t", ordered, "-m", "get").stdout
    assert got == f"get orderConf success. topic=[{ordered}], orderConf=[{conf}] ", got

    conf = f"{target.broker_name}:1"
    out = mqadmin(ns, "updateOrderConf", "-t", ordered, "-m", "put", "-v", conf).stdout
    assert out == f"update orderConf success. topic=[{ordered}], orderConf=[{conf}]", out
    got = mqadmin(ns, "updateOrderConf", "-t", ordered, "-m", "get").stdout
    assert f"orderConf=[{conf}]" in got, got
    out = mqadmin(ns, "updateOrderConf", "-t", ordered, "-m", "delete").stdout
    assert out == f"delete orderConf success. topic=[{ordered}]", out
    out = mqadmin(ns, "updateOrderConf", "-t", ordered, "-m", "get", check=False)
    assert failed(out, ResponseCode.QUERY_NOT_FOUND, f"Key: {ordered}"), out.output
    out = mqadmin(ns, "updateOrderConf", "-t", ordered, "-m", "other").stdout
    assert out.startswith("usage: mqadmin updateOrderConf"), out


def test_kv_config_and_write_perm(target: ClusterTarget) -> None:
    """updateKvConfig, deleteKvConfig (read back through updateOrderConf's namespace),
    wipeWritePerm, addWritePerm."""
    topic, ns = unique("KvTopic"), target.namesrv_addr
    args = ["-s", "ORDER_TOPIC_CONFIG", "-k", topic]
    out = mqadmin(ns, "updateKvConfig", *args, "-v", "broker-x:3").stdout
    assert out.strip() == "create or update kv config to namespace success.", out
    got = mqadmin(ns, "updateOrderConf", "-t", topic, "-m", "get").stdout
    assert "orderConf=[broker-x:3]" in got, got
    out = mqadmin(ns, "deleteKvConfig", *args).stdout
    assert out.strip() == "delete kv config from namespace success.", out
    got = mqadmin(ns, "updateOrderConf", "-t", topic, "-m", "get", check=False)
    assert failed(got, ResponseCode.QUERY_NOT_FOUND), got.output
    # Deleting what is not there succeeds as well.
    out = mqadmin(ns, "deleteKvConfig", "-s", "NoSuchNamespace", "-k", "k").stdout
    assert out.strip() == "delete kv config from namespace success.", out

    create_topic(ns, topic, queues=2)
    name = target.broker_name
    try:
        out = mqadmin(ns, "wipeWritePerm", "-b", name).stdout
        found = re.fullmatch(
            rf"wipe write perm of broker\[{name}\] in name server\[{ns}\] OK, (\d+)\n", out
        )
        assert found and int(found.group(1)) >= 1, out
        assert route_perm(target, topic) == 4
    finally:
        out = mqadmin(ns, "addWritePerm", "-b", name).stdout
    found = re.fullmatch(
        rf"add write perm of broker\[{name}\] in name server\[{ns}\] OK, (\d+)\n", out
    )
    assert found and int(found.group(1)) >= 1, out
    assert route_perm(target, topic) == 6
    for command, verb in (("wipeWritePerm", "wipe"), ("addWritePerm", "add")):
        out = mqadmin(ns, command, "-b", "no-such-broker").stdout
        assert out == f"{verb} write perm of broker[no-such-broker] in name server[{ns}] OK, 0\n"


def test_query_and_print_messages(target: ClusterTarget) -> None:
    """queryMsgByUniqueKey, printMsg, printMsgByQueue, allocateMQ."""
    topic, ns = unique("PrintTopic"), target.namesrv_addr
    create_topic(ns, topic, queues=2)
    sent = produce(target, "java", topic, 4, group=unique("PG"), keys_prefix="pm-", tag="TagP")
    wanted = sent[1]

    out = mqadmin(ns, "queryMsgByUniqueKey", "-t", topic, "-i", wanted["msgId"]).stdout
    assert re.search(rf"^Topic:\s+{topic}$", out, re.M), out
    assert re.search(rf"^Keys:\s+\[{wanted['keys']}\]$", out, re.M), out
    assert re.search(rf"^Queue ID:\s+{wanted['queueId']}$", out, re.M), out
    assert re.search(rf"^Queue Offset:\s+{wanted['queueOffset']}$", out, re.M), out
    assert "WARN: No Consumer" in out, out
    missing = mqadmin(
        ns, "queryMsgByUniqueKey", "-t", topic, "-i", "0A0B0C0D" + "0" * 24, check=False
    )
    assert failed(missing, ResponseCode.NO_MESSAGE, "no message"), missing.output

    out = mqadmin(ns, "printMsg", "-t", topic, "-d", "true").stdout
    heads = re.findall(
        r"^minOffset=(\d+), maxOffset=(\d+), "
        r"MessageQueue \[topic=(\S+), brokerName=(\S+), queueId=(\d+)\]$",
        out,
        re.M,
    )
    by_queue = {q: sum(1 for e in sent if e["queueId"] == q) for q in (0, 1)}
    assert sorted(heads, key=lambda h: h[4]) == [
        ("0", str(by_queue[q]), topic, target.broker_name, str(q)) for q in (0, 1)
    ], out
    rows = message_rows(out)
    assert sorted(r["msgId"] for r in rows) == sorted(e["msgId"] for e in sent), out
    assert {r["msgId"]: r["body"] for r in rows} == {e["msgId"]: f"body-{e['index']}" for e in sent}
    assert out.count("-" * 56) == 2, out

    queue = wanted["queueId"]
    args = ["-t", topic, "-a", target.broker_name, "-i", str(queue)]
    out = mqadmin(ns, "printMsgByQueue", *args, "-p", "true", "-f", "true").stdout
    rows = message_rows(out)
    assert [int(r["queueOffset"]) for r in rows] == list(range(by_queue[queue])), out
    assert all(r["body"] == "NOT PRINT BODY" for r in rows), out
    assert re.search(rf"^Tag: TagP\s+Count: {by_queue[queue]}$", out, re.M), out
    # Without -p nor -f it reads the queue and prints nothing.
    assert mqadmin(ns, "printMsgByQueue", *args).stdout.strip() == ""

    out = mqadmin(ns, "allocateMQ", "-t", topic, "-i", "127.0.0.1@a,127.0.0.1@b").stdout
    result = json.loads(out)["result"]
    # One queue each; which one depends on the order of the tool's HashSet of queues.
    assert sorted(result) == ["127.0.0.1@a", "127.0.0.1@b"], out
    given = [(q["brokerName"], q["topic"], q["queueId"]) for qs in result.values() for q in qs]
    assert all(len(qs) == 1 for qs in result.values()), out
    assert sorted(given) == [(target.broker_name, topic, 0), (target.broker_name, topic, 1)], out


def test_query_message_trace(target: ClusterTarget) -> None:
    """queryMsgTraceById: the trace a traced client would have written (a Pub and a SubAfter
    context), found by the message id among the trace topic's keys and printed as a table."""
    topic, traces, ns = unique("TracedTopic"), unique("TraceTopic"), target.namesrv_addr
    create_topic(ns, topic, queues=1)
    create_topic(ns, traces, queues=1)
    with Producer(unique("TracePG"), ns) as producer:
        sent = producer.send(Message(topic, b"traced", tags="TagT", keys=["tk"]))
        msg_id = sent.msg_id
        pub = ["Pub", "1700000000000", "DefaultRegion", "TracePG", topic, msg_id, "TagT", "tk"]
        pub += ["127.0.0.1:10911", "6", "3", "0", sent.offset_msg_id, "true"]
        sub = ["SubAfter", "req1", msg_id, "12", "true", "tk", "0", "1700000001000", "TraceCG"]
        other = ["Pub", "1700000000000", "R", "Other", topic, "FFFF", "", "", "h", "1", "1", "0"]
        other += ["x", "true"]
        data = "".join("\x01".join(ctx) + "\x02" for ctx in (pub, sub))
        producer.send(Message(traces, data.encode(), keys=[msg_id, "tk"]))
        other_data = "\x01".join(other) + "\x02"
        producer.send(Message(traces, other_data.encode(), keys=["FFFF"]))

    out = mqadmin(ns, "queryMsgTraceById", "-i", msg_id, "-t", traces).stdout
    table = [line.split() for line in out.splitlines() if line.strip()]
    assert [row[:3] for row in table] == [
        ["#Type", "#ProducerGroup", "#ClientHost"],
        ["Pub", "TracePG", "127.0.0.1"],
        ["#Type", "#ConsumerGroup", "#ClientHost"],
        ["Sub", "TraceCG", "127.0.0.1"],
    ], out
    assert [row[-2:] for row in table[1::2]] == [["3ms", "success"], ["12ms", "success"]], out

    out = mqadmin(ns, "queryMsgTraceById", "-i", "NOPE0000", "-t", traces, check=False)
    assert failed(out, ResponseCode.NO_MESSAGE), out.output
    # The default trace topic exists only with traceTopicEnable=true.
    out = mqadmin(ns, "queryMsgTraceById", "-i", msg_id, check=False)
    assert failed(out, ResponseCode.TOPIC_NOT_EXIST, "RMQ_SYS_TRACE_TOPIC"), out.output


def test_producer_connection_and_consumer_config(
    client: SyncRemotingClient, target: ClusterTarget
) -> None:
    """producerConnection (a producer heartbeating on this test's connection),
    getConsumerConfig."""
    topic, ns = unique("ConnTopic"), target.namesrv_addr
    create_topic(ns, topic, queues=1)
    group = unique("ConnPG")
    payload = {
        "clientID": "127.0.0.1@conn",
        "consumerDataSet": [],
        "producerDataSet": [{"groupName": group}],
    }
    request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, body.dumps(payload).encode())
    assert client.invoke(target.broker_addr, request, 10).code == ResponseCode.SUCCESS
    out = mqadmin(ns, "producerConnection", "-g", group, "-t", topic).stdout
    assert re.fullmatch(
        r"0001  127\.0\.0\.1@conn\s+127\.0\.0\.1:\d+\s+PYTHON\s+V4_9_8\s*\n", out
    ), out
    nobody = unique("NoPG")
    out = mqadmin(ns, "producerConnection", "-g", nobody, "-t", topic, check=False)
    assert failed(out, ResponseCode.SYSTEM_ERROR, f"the producer group[{nobody}] not exist"), out

    group = unique("ConfigGroup")
    mqadmin(ns, "updateSubGroup", "-c", target.cluster_name, "-g", group, "-q", "2")
    out = mqadmin(ns, "getConsumerConfig", "-g", group).stdout
    lines = out.splitlines()
    assert lines[0] == f"{'=' * 29}{target.cluster_name}:{target.broker_name}{'=' * 29}", out
    settings = dict(re.findall(r"^(\w+)\s+=  (.*)$", out, re.M))
    assert settings == {
        "groupName": group,
        "consumeEnable": "true",
        "consumeFromMinEnable": "false",
        "consumeBroadcastEnable": "false",
        "retryQueueNums": "2",
        "retryMaxTimes": "16",
        "brokerId": "0",
        "whichBrokerWhenConsumeSlowly": "1",
        "notifyConsumerIdsChangedEnable": "true",
    }, out
    assert mqadmin(ns, "getConsumerConfig", "-g", unique("NoConfigGroup")).output.strip() == ""


def test_clone_group_offset(client: SyncRemotingClient, target: ClusterTarget) -> None:
    topic, group, ns = unique("CloneTopic"), unique("CloneSrc"), target.namesrv_addr
    create_topic(ns, topic, queues=2)
    sent = produce(target, "java", topic, 6, group=unique("PG"))
    consume(target, "java", topic, 6, group=group)
    wanted = {q: sum(1 for e in sent if e["queueId"] == q) for q in (0, 1)}
    # The consumer read all six: what a lost oneway commit left out is committed here.
    settle_consumed_group(target.broker_addr, group, topic, queues=2, total=6)
    assert {q: committed(client, target, group, topic, q) for q in (0, 1)} == wanted
    copy = unique("CloneDst")
    out = mqadmin(ns, "cloneGroupOffset", "-s", group, "-d", copy, "-t", topic).stdout
    assert (
        out == f"clone group offset success. srcGroup[{group}], destGroup=[{copy}], topic[{topic}]"
    )
    assert {q: committed(client, target, copy, topic, q) for q in (0, 1)} == wanted
    # A group that never consumed has no retry topic: the tool fails looking it up.
    nobody = unique("NoCloneSrc")
    out = mqadmin(ns, "cloneGroupOffset", "-s", nobody, "-d", copy, "-t", topic, check=False)
    assert failed(out, ResponseCode.TOPIC_NOT_EXIST, f"%RETRY%{nobody}"), out.output


def test_send_and_consume_commands(target: ClusterTarget) -> None:
    """sendMessage, consumeMessage, sendMsgStatus, checkMsgSendRT, clusterRT."""
    topic, ns, name = unique("SendCmdTopic"), target.namesrv_addr, target.broker_name
    create_topic(ns, topic, queues=2)
    out = mqadmin(ns, "sendMessage", "-t", topic, "-p", "hello", "-k", "sk1", "-c", "TagS").stdout
    head, row = out.splitlines()
    assert head.split() == ["#Broker", "Name", "#QID", "#Send", "Result", "#MsgId"], out
    assert row.split()[0] == name and row.split()[2] == "SEND_OK", out
    other = str(1 - int(row.split()[1]))  # the other queue: one message in each
    out = mqadmin(ns, "sendMessage", "-t", topic, "-p", "hello-q", "-b", name, "-i", other).stdout
    assert out.splitlines()[1].split()[:3] == [name, other, "SEND_OK"], out

    out = mqadmin(ns, "consumeMessage", "-t", topic).stdout
    assert out.count("Consume ok") == 2, out
    assert sorted(r["body"] for r in message_rows(out)) == ["hello", "hello-q"], out
    for queue in (0, 1):
        assert f"queueId={queue}] print msg finished. status=NO_NEW_MSG, offset=1" in out, out
    args = ["-t", topic, "-b", name, "-i", other, "-o", "0", "-c", "1"]
    out = mqadmin(ns, "consumeMessage", *args).stdout
    assert [r["body"] for r in message_rows(out)] == ["hello-q"], out

    out = mqadmin(ns, "sendMsgStatus", "-b", name, "-s", "16", "-c", "2").stdout
    results = re.findall(
        r"^rt=\d+ms, SendResult=SendResult \[sendStatus=(\w+), .*"
        r"messageQueue=MessageQueue \[topic=(\S+), brokerName=(\S+), queueId=0\]",
        out,
        re.M,
    )
    assert results == [("SEND_OK", name, name)] * 2, out

    out = mqadmin(ns, "checkMsgSendRT", "-t", topic, "-a", "3", "-s", "16").stdout
    lines = out.splitlines()
    assert lines[0].split() == ["#Broker", "Name", "#QID", "#Send", "Result", "#RT"], out
    rows = [line.split() for line in lines[1:4]]
    assert all(r[0] == name and r[1] in ("0", "1") and r[2] == "true" for r in rows), out
    assert re.fullmatch(r"Avg RT: \d+\.\d\d", lines[4]), out

    # clusterRT sends a round to each broker, then sleeps -i seconds and sends again: forever.
    args = ["-a", "3", "-s", "16", "-c", target.cluster_name, "-i", "60"]
    out = mqadmin_until(ns, rf"^{target.cluster_name}\s+{name}\s", "clusterRT", *args).stdout
    head, row = out.splitlines()[-2:]
    assert head.split() == [
        "#Cluster",
        "Name",
        "#Broker",
        "Name",
        "#RT",
        "#successCount",
        "#failCount",
    ]
    cluster, broker, rt, ok, failures = row.split()
    assert (cluster, broker, ok, failures) == (target.cluster_name, name, "3", "0"), out
    assert re.fullmatch(r"\d+\.\d\d", rt), out


def test_start_monitoring_starts_and_returns(target: ClusterTarget) -> None:
    """startMonitoring starts a monitor in the tool's own JVM and returns; printing nothing."""
    out = mqadmin(target.namesrv_addr, "startMonitoring")
    assert out.output.strip() == "", out.output


def test_acl_commands_answer_as_without_acl(target: ClusterTarget) -> None:
    """The ACL sub-commands against a broker without ACL (aclEnable=false): RocketMQ's
    failure codes; clusterAclConfigVersion prints its header and fails (on RocketMQ by a
    timeout, for its broker never answers; on Sidewinder at once). Our mqadmin fails the same
    way beside it: the same code, the same header."""
    ns, broker, cluster = target.namesrv_addr, target.broker_addr, target.cluster_name

    def ours_refused(args: list[str], code: int) -> None:
        done = ours_run(target, *args)
        assert done.returncode == 1 and f"code {code}: " in done.stderr, done
        assert done.stdout == "", done

    for where in (["-b", broker], ["-c", cluster]):
        args = ["updateAclConfig", *where, "-a", "RocketMQ", "-s", "12345678"]
        out = mqadmin(ns, *args, check=False)
        assert failed(out, ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED), out.output
        assert "UpdateAccessConfigSubCommand command failed" in out.output
        ours_refused(args, ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED)
    args = ["deleteAclConfig", "-b", broker, "-a", "RocketMQ"]
    out = mqadmin(ns, *args, check=False)
    assert failed(out, ResponseCode.DELETE_ACL_CONFIG_FAILED), out.output
    ours_refused(args, ResponseCode.DELETE_ACL_CONFIG_FAILED)
    args = ["updateGlobalWhiteAddr", "-b", broker, "-g", "10.10.*.*"]
    out = mqadmin(ns, *args, check=False)
    assert failed(out, ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED), out.output
    ours_refused(args, ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED)

    out = mqadmin(ns, "clusterAclConfigVersion", "-c", cluster, check=False)
    assert out.stdout.split() == [
        "#Cluster", "Name", "#Broker", "Name", "#Broker", "Addr", "#AclFilePath",
        "#AclConfigVersionNum", "#AclLastUpdateTime",
    ], out.output  # fmt: skip
    assert "ClusterAclConfigVersionListSubCommand command failed" in out.stderr, out.output
    done = ours_run(target, "clusterAclConfigVersion", "-c", cluster)
    assert done.returncode == 1 and done.stdout == out.stdout, done
    never_answers = target.kind == "rocketmq"
    assert ("no response to code 52" if never_answers else "code 1: ") in done.stderr, done

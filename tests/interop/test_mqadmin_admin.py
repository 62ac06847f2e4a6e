"""RocketMQ's own mqadmin, its config, export and maintenance sub-commands, on every target;
and the admin codes no sub-command sends (303, 305, CHECK_CLIENT_CONFIG) as raw requests."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from interop.mqadmin import create_topic, mqadmin
from interop.offsets import wait_committed
from interop.target import ClusterTarget
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.message import java_string_hash
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import unique
from tests.interop.admin_queries import broker_status_after_warm_up
from tests.interop.scenarios import consume, produce

pytestmark = pytest.mark.interop


def broker_settings(target: ClusterTarget) -> dict[str, str]:
    out = mqadmin(target.namesrv_addr, "getBrokerConfig", "-b", target.broker_addr).stdout
    return dict(re.findall(r"^(\w+)\s*=\s*(.*?)\s*$", out, re.MULTILINE))


def conf_file(target: ClusterTarget) -> dict[str, str]:
    text = (target.workdir / "broker.conf").read_text()
    return dict(re.findall(r"^(\w+)=(.*?)\s*$", text, re.MULTILINE))


def route_perm(target: ClusterTarget, topic: str) -> int:
    out = mqadmin(target.namesrv_addr, "topicRoute", "-t", topic).stdout
    return int(re.search(r'"perm"\s*:\s*(\d+)', out).group(1))  # type: ignore[union-attr]


def update_config(target: ClusterTarget, key: str, value: str) -> str:
    args = ["-b", target.broker_addr, "-k", key, "-v", value]
    return mqadmin(target.namesrv_addr, "updateBrokerConfig", *args).stdout


def wait_for(what: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not what():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def test_update_broker_config_is_live_persisted_and_shown(target: ClusterTarget) -> None:
    """brokerPermission=4 (read only): getBrokerConfig shows it, the conf file holds it, and
    the name server's route for a topic carries it at once (the broker re-registers)."""
    topic = unique("ConfigPermTopic")
    create_topic(target.namesrv_addr, topic, queues=2)
    assert route_perm(target, topic) == 6
    try:
        out = update_config(target, "brokerPermission", "4")
        assert f"update broker config success, {target.broker_addr}" in out, out
        assert broker_settings(target)["brokerPermission"] == "4"
        assert conf_file(target)["brokerPermission"] == "4"
        assert wait_for(lambda: route_perm(target, topic) == 4)
    finally:
        update_config(target, "brokerPermission", "6")
    assert wait_for(lambda: route_perm(target, topic) == 6)
    assert conf_file(target)["brokerPermission"] == "6"


def test_update_broker_config_ignores_an_unknown_key(target: ClusterTarget) -> None:
    out = update_config(target, "noSuchSettingAnywhere", "1")
    assert "update broker config success" in out, out
    assert "noSuchSettingAnywhere" not in broker_settings(target)
    assert "noSuchSettingAnywhere" not in conf_file(target)


def test_update_broker_config_refusals(target: ClusterTarget) -> None:
    """Ours refuses what RocketMQ 4.9.8 refuses (the black list: NO_PERMISSION) and a value it
    cannot use (SYSTEM_ERROR naming it). The reference broker is 4.9.7, which has no black
    list and takes a bad value silently, so this runs on Sidewinder only."""
    if target.kind == "rocketmq":
        pytest.skip("RocketMQ 4.9.7 predates configBlackList (4.9.8) and takes any value")
    args = ["-b", target.broker_addr, "-k", "brokerConfigPath", "-v", "/tmp/elsewhere"]
    out = mqadmin(target.namesrv_addr, "updateBrokerConfig", *args, check=False).output
    assert "CODE: 16" in out and "black list" in out, out
    args = ["-b", target.broker_addr, "-k", "fileReservedTime", "-v", "soon"]
    out = mqadmin(target.namesrv_addr, "updateBrokerConfig", *args, check=False).output
    assert "CODE: 1" in out and "fileReservedTime='soon'" in out, out
    assert broker_settings(target)["fileReservedTime"] == "72"


def test_export_configs_metadata_and_metrics(target: ClusterTarget, tmp_path: Path) -> None:
    topic, group = unique("ExportTopic"), unique("ExportGroup")
    ns, cluster = target.namesrv_addr, target.cluster_name
    create_topic(ns, topic, queues=3)
    mqadmin(ns, "updateSubGroup", "-c", cluster, "-g", group)

    assert "success" in mqadmin(ns, "exportConfigs", "-c", cluster, "-f", str(tmp_path)).stdout
    configs = json.loads((tmp_path / "configs.json").read_text())
    settings = configs["brokerConfigs"][target.broker_name]
    assert settings["brokerName"] == target.broker_name
    assert settings["flushDiskType"] == "ASYNC_FLUSH" and settings["useTLS"] == "false"
    assert configs["clusterScale"]["masterBrokerSize"] == 1

    assert "success" in mqadmin(ns, "exportMetadata", "-c", cluster, "-f", str(tmp_path)).stdout
    metadata = json.loads((tmp_path / "metadata.json").read_text())
    topics = metadata["topicConfigTable"]
    assert topics[topic]["writeQueueNums"] == 3
    # GET_SYSTEM_TOPIC_LIST_FROM_BROKER: the tool leaves out system topics and the broker's names.
    for system in ("TBW102", "SCHEDULE_TOPIC_XXXX", "SELF_TEST_TOPIC", cluster, target.broker_name):
        assert system not in topics, system
    assert not [t for t in topics if t.startswith(("%RETRY%", "%DLQ%"))]
    assert group in metadata["subscriptionGroupTable"]

    broker_status_after_warm_up(target)
    assert "success" in mqadmin(ns, "exportMetrics", "-c", cluster, "-f", str(tmp_path)).stdout
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    report = metrics["evaluateReport"][target.broker_name]
    assert report["runtimeQuota"]["topicSize"] >= 1
    assert report["runtimeVersion"]["rocketmqVersion"]


def test_query_consume_queue(target: ClusterTarget) -> None:
    topic, ns = unique("QueryCqTopic"), target.namesrv_addr
    create_topic(ns, topic, queues=1)
    sent = produce(target, "java", topic, 3, group=unique("PG"), tag="TagCq")
    args = ["-t", topic, "-q", "0", "-i", "1", "-c", "5", "-b", target.broker_addr]
    out = mqadmin(ns, "queryCq", *args).stdout
    assert "max: 3, min: 0" in out, out
    rows = re.findall(r"physicOffset=(\d+), physicSize=(\d+), tagsCode=(-?\d+)", out)
    assert [r[2] for r in rows] == [str(java_string_hash("TagCq"))] * 2, out
    assert re.findall(r"^idx: (\d+)$", out, re.MULTILINE) == ["1", "2"], out
    by_offset = {e["queueOffset"]: e for e in sent}
    assert int(rows[0][0]) == int(by_offset[1]["offsetMsgId"][16:], 16)

    offline = unique("CqGroup")
    out = mqadmin(ns, "queryCq", *args, "-g", offline).stdout
    assert f"{offline}@{topic} is not online!" in out, out

    # An unknown queue: RocketMQ answers SYSTEM_ERROR naming it; the tool prints the trace.
    args = ["-t", topic, "-q", "7", "-i", "0", "-b", target.broker_addr]
    out = mqadmin(ns, "queryCq", *args, check=False).output
    assert f"7@{topic} is not exist!" in out, out


def test_maintenance_commands_answer_success(target: ClusterTarget) -> None:
    topic, ns, broker = unique("MaintTopic"), target.namesrv_addr, target.broker_addr
    create_topic(ns, topic, queues=1)
    produce(target, "java", topic, 2, group=unique("PG"))
    for command in ("cleanExpiredCQ", "cleanUnusedTopic", "deleteExpiredCommitLog"):
        out = mqadmin(ns, command, "-b", broker).stdout
        assert out.strip() == "success", (command, out)
    out = mqadmin(ns, "cleanExpiredCQ", "-c", target.cluster_name).stdout
    assert out.strip() == "success", out
    # Nothing in use went: the topic's queue still holds its messages.
    args = ["-t", topic, "-q", "0", "-i", "0", "-b", broker]
    assert "max: 2, min: 0" in mqadmin(ns, "queryCq", *args).stdout


@pytest.mark.slow
def test_expired_commit_log_and_queues_go_on_request(
    make_target: Callable[..., ClusterTarget],
) -> None:
    """fileReservedTime=0 by updateBrokerConfig, then deleteExpiredCommitLog: every segment
    but the newest goes at the next cleanup round; cleanExpiredCQ then drops the queue whose
    messages were all in them, and keeps the one still readable. Slow: a cluster of its own,
    and RocketMQ's first cleanup round comes a minute after it starts (86 s for both targets;
    the store's tests/store/test_cleanup.py covers the manual delete in a second)."""
    target = make_target(cleanResourceInterval="1000", deleteWhen="04")
    ns, broker = target.namesrv_addr, target.broker_addr
    old, filler = unique("OldTopic"), unique("FillTopic")
    create_topic(ns, old, queues=1)
    create_topic(ns, filler, queues=1)
    produce(target, "java", old, 3, group=unique("PG"))
    # 9.6 MB, more than one 8 MiB segment; bodies under 4 KiB, which the producer compresses.
    produce(target, "java", filler, 3200, group=unique("PG"), body_size=3000)
    segments = target.store_path / "commitlog"
    before = sorted(p.name for p in segments.iterdir())
    assert len(before) >= 2, before
    update_config(target, "fileReservedTime", "0")
    assert mqadmin(ns, "deleteExpiredCommitLog", "-b", broker).stdout.strip() == "success"
    # RocketMQ's first cleanup round comes a minute after start, whatever the interval.
    assert wait_for(lambda: before[0] not in {p.name for p in segments.iterdir()}, 150)
    assert mqadmin(ns, "cleanExpiredCQ", "-b", broker).stdout.strip() == "success"
    queues = target.store_path / "consumequeue"
    assert wait_for(lambda: not (queues / old / "0").exists(), 10)
    assert (queues / filler / "0").exists()


def test_producer_instances(client: SyncRemotingClient, target: ClusterTarget) -> None:
    """A producer is known by its heartbeat (this test's connection sends one), and `producer`
    lists it with its address, language and version."""
    group = unique("ProducerInfoGroup")
    payload = {
        "clientID": "127.0.0.1@info",
        "consumerDataSet": [],
        "producerDataSet": [{"groupName": group}],
    }
    request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, body.dumps(payload).encode())
    assert client.invoke(target.broker_addr, request, 10).code == ResponseCode.SUCCESS
    out = mqadmin(target.namesrv_addr, "producer", "-b", target.broker_addr).stdout
    line = next((x for x in out.splitlines() if f"({group})" in x), out)
    assert re.search(
        rf"^producer group \({group}\) instance : clientId=127\.0\.0\.1@info,"
        r"remoteIP=/127\.0\.0\.1:\d+, language=\w+, version=\d+, lastUpdateTimestamp=\d+$",
        line,
    ), line


def test_delete_sub_group_removes_offsets(target: ClusterTarget) -> None:
    topic, group, ns = unique("DelGroupTopic"), unique("DelGroup"), target.namesrv_addr
    create_topic(ns, topic, queues=2)
    produce(target, "java", topic, 6, group=unique("PG"))
    consume(target, "java", topic, 6, group=group)
    wait_committed(target.broker_addr, group, topic, queues=2, total=6)
    progress = mqadmin(ns, "consumerProgress", "-g", group).stdout
    assert len([line for line in progress.splitlines() if line.startswith(topic)]) == 2
    args = ["-c", target.cluster_name, "-g", group, "-r", "true"]
    out = mqadmin(ns, "deleteSubGroup", *args).stdout
    assert f"delete subscription group [{group}] from broker [{target.broker_addr}]" in out, out
    progress = mqadmin(ns, "consumerProgress", "-g", group, check=False).output
    assert not [line for line in progress.splitlines() if line.startswith(topic)], progress


def check_client(
    client: SyncRemotingClient, target: ClusterTarget, expression: str, kind: str = "SQL92"
) -> RemotingCommand:
    subscription = {
        "classFilterMode": False,
        "codeSet": [],
        "expressionType": kind,
        "subString": expression,
        "subVersion": int(time.time() * 1000),
        "tagsSet": [],
        "topic": "CheckClientTopic",
    }
    payload = {"clientId": "check@1", "group": "CheckGroup", "subscriptionData": subscription}
    request = RemotingCommand.request(
        RequestCode.CHECK_CLIENT_CONFIG, {}, body.dumps(payload).encode()
    )
    return client.invoke(target.broker_addr, request, 10)


def test_check_client_config_compiles_sql92(
    client: SyncRemotingClient, target: ClusterTarget
) -> None:
    assert check_client(client, target, "a > 5 AND b = 'x'").code == ResponseCode.SUCCESS
    assert check_client(client, target, "TagA || TagB", "TAG").code == ResponseCode.SUCCESS
    for bad in ("a >", "a = = 1", "(a > 1"):
        reply = check_client(client, target, bad)
        assert reply.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED, (bad, reply.remark)
        assert reply.remark, bad


def test_system_topic_list_and_consume_time_span(
    client: SyncRemotingClient, target: ClusterTarget
) -> None:
    request = RemotingCommand.request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, {})
    reply = client.invoke(target.broker_addr, request, 10)
    assert reply.code == ResponseCode.SUCCESS
    listed = set(body.loads(reply.body_bytes)["topicList"])
    wanted = {"TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "OFFSET_MOVED_EVENT"}
    assert wanted | {target.cluster_name, target.broker_name} <= listed, listed

    topic, group = unique("SpanTopic"), unique("SpanGroup")
    create_topic(target.namesrv_addr, topic, queues=2)
    produce(target, "java", topic, 4, group=unique("PG"))
    request = RemotingCommand.request(
        RequestCode.QUERY_CONSUME_TIME_SPAN, {"topic": topic, "group": group}
    )
    reply = client.invoke(target.broker_addr, request, 10)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    spans = body.loads(reply.body_bytes)["consumeTimeSpanSet"]
    assert sorted(s["messageQueue"]["queueId"] for s in spans) == [0, 1]
    for span in spans:
        assert span["minTimeStamp"] > 0 and span["maxTimeStamp"] >= span["minTimeStamp"]
        assert span["consumeTimeStamp"] == span["minTimeStamp"]  # nothing consumed yet
        assert span["delayTime"] > 0

    request = RemotingCommand.request(
        RequestCode.QUERY_CONSUME_TIME_SPAN, {"topic": unique("NoSpanTopic"), "group": group}
    )
    reply = client.invoke(target.broker_addr, request, 10)
    assert reply.code == ResponseCode.TOPIC_NOT_EXIST, reply.remark
    assert "not exist" in (reply.remark or "")


def namesrv_settings(target: ClusterTarget) -> dict[str, str]:
    out = mqadmin(target.namesrv_addr, "getNamesrvConfig").stdout
    return dict(re.findall(r"^(\w+)\s*=\s*(.*?)\s*$", out, re.MULTILINE))


def test_update_namesrv_config(target: ClusterTarget) -> None:
    ns = target.namesrv_addr
    assert namesrv_settings(target)["orderMessageEnable"] == "false"
    try:
        out = mqadmin(ns, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true").stdout
        assert "update name server config success!" in out, out
        assert namesrv_settings(target)["orderMessageEnable"] == "true"
    finally:
        mqadmin(ns, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false")
    assert namesrv_settings(target)["orderMessageEnable"] == "false"
    args = ["-k", "kvConfigPath", "-v", "/tmp/elsewhere.json"]
    out = mqadmin(ns, "updateNamesrvConfig", *args, check=False).output
    assert "CODE: 16" in out and "Can not update config path" in out, out
    assert namesrv_settings(target)["kvConfigPath"] != "/tmp/elsewhere.json"

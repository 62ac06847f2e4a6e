"""Our name server as a real process in front of a real RocketMQ 4.9 broker.

The broker registers with `mqnamesrv`; the stock Java client and RocketMQ's own mqadmin then
find routes through it, and produce and consume as with RocketMQ's name server.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from interop import fastjson
from interop.drivers import consume_messages, produce_messages
from interop.mqadmin import create_topic, mqadmin
from interop.rocketmq import RocketMQCluster
from interop.sidewinder import SidewinderNamesrv
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import unique
from tests.interop.admin_queries import mqadmin_after_warm_up
from tests.interop.scenarios import assert_received_all

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SidewinderNamesrv, RocketMQCluster]]:
    workdir = tmp_path_factory.mktemp("namesrv")
    namesrv = SidewinderNamesrv(workdir / "ours").start()
    broker = RocketMQCluster(workdir / "rocketmq", broker_conf={"namesrvAddr": namesrv.addr})
    try:
        broker.start_broker()
        yield namesrv, broker
    finally:
        broker.kill_broker()  # nothing reads its store afterwards
        namesrv.stop()


def ask(
    addr: str, code: int, ext: dict[str, str] | None = None, *, version: int | None = None
) -> RemotingCommand:
    client = SyncRemotingClient()
    request = RemotingCommand.request(code, ext)
    if version is not None:
        request.version = version
    try:
        return client.invoke(addr, request, 5)
    finally:
        client.close()


def test_the_broker_registers_and_routes_come_back(
    cluster: tuple[SidewinderNamesrv, RocketMQCluster],
) -> None:
    namesrv, broker = cluster
    route = ask(namesrv.addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
    assert route.code == ResponseCode.SUCCESS, route.remark
    assert b'"brokerAddrs":{"0":"' in route.body_bytes  # a 4.9.4+ client: standard JSON
    old = ask(namesrv.addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}, version=63)
    assert b'"brokerAddrs":{0:"' in old.body_bytes  # what the C++ core (version 63) reads
    data = fastjson.loads(route.body_bytes.decode())
    assert data["brokerDatas"][0]["brokerAddrs"]["0"] == broker.broker_addr
    missing = ask(namesrv.addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "NoSuchTopic"})
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    assert missing.remark is not None and "NoSuchTopic" in missing.remark
    clusters = fastjson.loads(
        ask(namesrv.addr, RequestCode.GET_BROKER_CLUSTER_INFO).body_bytes.decode()
    )
    assert clusters["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}


def test_mqadmin_and_the_java_client_work_through_our_name_server(
    cluster: tuple[SidewinderNamesrv, RocketMQCluster],
) -> None:
    namesrv, _ = cluster
    topic, group = unique("ViaOurNamesrv"), unique("ViaOurNamesrvGroup")
    create_topic(namesrv.addr, topic, queues=4)
    listed = mqadmin(namesrv.addr, "topicList").output
    assert topic in listed
    route = fastjson.loads_from(mqadmin(namesrv.addr, "topicRoute", "-t", topic).output)
    assert sum(q["writeQueueNums"] for q in route["queueDatas"]) == 4
    assert "broker-a" in mqadmin_after_warm_up(namesrv.addr, "clusterList")
    sent = produce_messages("java", namesrv=namesrv.addr, topic=topic, count=200, group=group)
    assert all(e["status"] == "SEND_OK" for e in sent) and len(sent) == 200
    run = consume_messages("java", namesrv=namesrv.addr, topic=topic, expect=200, group=group)
    assert_received_all(run, sent, topic=topic)


def test_a_killed_broker_leaves_the_routes_at_once(tmp_path: Path) -> None:
    namesrv = SidewinderNamesrv(tmp_path / "ours").start()
    broker = RocketMQCluster(tmp_path / "rocketmq", broker_conf={"namesrvAddr": namesrv.addr})
    try:
        broker.start_broker()
        ok = ask(namesrv.addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
        assert ok.code == ResponseCode.SUCCESS
        broker.kill_broker()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            gone = ask(namesrv.addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
            if gone.code == ResponseCode.TOPIC_NOT_EXIST:
                break
            time.sleep(0.2)
        assert gone.code == ResponseCode.TOPIC_NOT_EXIST  # long before the 120 s expiry
    finally:
        broker.kill_broker()
        namesrv.process.signal(signal.SIGTERM)
        assert namesrv.stop() == 0


def test_compressed_register_bodies_both_ways(tmp_path: Path) -> None:
    """compressedRegister=true: a RocketMQ broker's deflated body registers with our name
    server, and ours with RocketMQ's name server, topics and all."""
    from interop.sidewinder import SidewinderCluster

    ours_ns = SidewinderNamesrv(tmp_path / "ours-ns").start()
    theirs = RocketMQCluster(
        tmp_path / "rocketmq",
        broker_conf={"namesrvAddr": ours_ns.addr, "compressedRegister": "true"},
    )
    ours = SidewinderCluster(
        tmp_path / "ours",
        broker_conf={
            "compressedRegister": "true",
            "brokerName": "broker-sw",
            "namesrvAddr": theirs.namesrv_addr,  # RocketMQ's own name server
        },
    )
    try:
        theirs.start_broker()
        route = ask(ours_ns.addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
        assert route.code == ResponseCode.SUCCESS, route.remark
        assert theirs.broker_addr in route.body_bytes.decode()

        theirs.start_namesrv()
        ours.start_broker()
        topic = unique("Compressed")
        create_topic(theirs.namesrv_addr, topic, cluster="DefaultCluster")
        deadline = time.monotonic() + 30
        while True:
            route = ask(theirs.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            if route.code == ResponseCode.SUCCESS and b"broker-sw" in route.body_bytes:
                break
            assert time.monotonic() < deadline, route.remark
            time.sleep(0.5)
        data = fastjson.loads(route.body_bytes.decode())
        (queue_data,) = [q for q in data["queueDatas"] if q["brokerName"] == "broker-sw"]
        assert queue_data["writeQueueNums"] == 4
    finally:
        ours.stop_broker()
        theirs.kill()  # nothing reads its store afterwards
        ours_ns.stop()

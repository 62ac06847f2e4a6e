"""The console's JSON API without a browser, on both targets: the same data as the pages, CSRF
on every change, and a broker that does not answer shown as such, in bounded time."""

from __future__ import annotations

import http.client
import socket
import time
import urllib.error
import zlib
from datetime import datetime, timedelta
from urllib.parse import urlencode

import pytest

from interop.target import ClusterTarget
from sidewinder.client.admin import Admin
from sidewinder.client.producer import Message
from sidewinder.client.sync import Admin as SyncAdmin
from sidewinder.client.sync import Producer
from sidewinder.console.calls import CALL_TIMEOUT_S, guarded
from sidewinder.console.messages import render_body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import RegisterBrokerRequestHeader
from sidewinder.protocol.message import encode_offset_msg_id
from sidewinder.protocol.register_body import encode_register_body
from sidewinder.remoting.client import SyncRemotingClient
from tests.console.conftest import ApiClient, ConsoleProcess, wait_for
from tests.helpers import run, unique

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("console")]


def test_overview_lists_the_broker(target: ClusterTarget, api: ApiClient) -> None:
    overview = api.get("/api/overview")
    brokers = overview["clusters"][target.cluster_name]
    assert [b["addr"] for b in brokers] == [target.broker_addr]
    assert brokers[0]["alive"], brokers[0]["error"]
    assert brokers[0]["role"] == "MASTER"
    if brokers[0]["error"] is None:  # RocketMQ's first seconds: no statistics yet
        assert brokers[0]["version"].startswith("V4_")


def test_a_change_without_the_csrf_token_is_refused(api: ApiClient) -> None:
    topic = unique("ConsoleNoToken")
    status, answer = api.post("/api/topics/save", {"name": topic, "cluster": "x"}, token="")
    assert status == 403
    assert "CSRF" in answer["error"]


def test_create_and_delete_a_topic(target: ClusterTarget, api: ApiClient) -> None:
    topic = unique("ConsoleApi")
    fields = {"name": topic, "cluster": target.cluster_name, "queues": 3}
    status, answer = api.post("/api/topics/save", fields)
    assert status == 200, answer
    assert answer["brokers"] == [target.broker_addr]
    detail = api.get(f"/api/topic?name={topic}")
    assert len(detail["queues"]) == 3
    assert topic in [t["name"] for t in api.get("/api/topics?kind=normal")["topics"]]
    status, _ = api.post("/api/topics/delete", {"name": topic, "cluster": target.cluster_name})
    assert status == 200
    assert topic not in [t["name"] for t in api.get("/api/topics")["topics"]]


def test_topic_kinds(api: ApiClient) -> None:
    system = [t["name"] for t in api.get("/api/topics?kind=system")["topics"]]
    assert "TBW102" in system
    normal = [t["name"] for t in api.get("/api/topics?kind=normal")["topics"]]
    assert "TBW102" not in normal
    assert not [n for n in normal if n.endswith("_REPLY_TOPIC") or n == "SELF_TEST_TOPIC"]


def test_a_silent_broker_is_reported_in_bounded_time() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        addr = f"127.0.0.1:{silent.getsockname()[1]}"

        async def scenario() -> None:
            async with Admin("127.0.0.1:1") as admin:
                started = time.monotonic()
                outcome = await guarded(admin.broker_runtime(addr), timeout_s=1.0)
                assert not outcome.ok
                assert time.monotonic() - started < 3

        run(scenario, 30)


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b'{"a": [1, 2]}', "json"),
        (b"plain <b>text</b>", "text"),
        (bytes(range(40)), "hex"),
        (b"", "empty"),
    ],
)
def test_body_rendering(data: bytes, kind: str) -> None:
    rendered = render_body(data)
    assert rendered.kind == kind
    if kind == "json":
        assert rendered.text == '{\n  "a": [\n    1,\n    2\n  ]\n}'


def test_send_a_test_message(target: ClusterTarget, api: ApiClient) -> None:
    topic = unique("ConsoleSend")
    api.post("/api/topics/save", {"name": topic, "cluster": target.cluster_name, "queues": 2})
    fields = {"topic": topic, "body": '{"hello": "console"}', "tags": "t", "keys": "k1 k2"}
    status, sent = api.post("/api/topic/send", fields)
    assert status == 200, sent
    assert sent["status"] == "SEND_OK"
    found = api.get(f"/api/message?id={sent['offset_msg_id']}")["message"]
    assert found["keys"] == ["k1", "k2"]
    assert found["body"] == {"kind": "json", "text": '{\n  "hello": "console"\n}', "size": 20}


def test_overview_samples_tps_for_its_chart(target: ClusterTarget, api: ApiClient) -> None:
    chart = api.get("/api/overview")["tps"][target.cluster_name]
    assert chart["samples"] >= 1
    assert chart["width"] > 0


def test_export_of_an_empty_dead_letter_queue(api: ApiClient) -> None:
    with api.opener.open(f"{api.base}/api/dlq/export?group={unique('nobody')}") as reply:
        assert reply.headers["Content-Type"].startswith("application/x-ndjson")
        assert reply.read() == b""


@pytest.mark.parametrize("back", ["//evil.example/", "/\\evil.example/", "https://evil.example/"])
def test_a_failed_form_never_redirects_off_the_site(api: ApiClient, back: str) -> None:
    token = api.token()
    connection = http.client.HTTPConnection(api.base.removeprefix("http://"), timeout=30)
    fields = {"csrf_token": token, "group": "g", "topic": unique("NoSuchTopic"), "back": back}
    connection.request(
        "POST",
        "/group/reset",
        urlencode(fields),
        {
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": f"mqconsole_csrf={token}",
        },
    )
    reply = connection.getresponse()
    assert reply.status == 303
    assert reply.getheader("Location", "").startswith("/?failure=")


def test_producers_lists_a_connected_producer(target: ClusterTarget, api: ApiClient) -> None:
    group = unique("console_producer_page")
    with Producer(group, target.namesrv_addr) as producer:
        producer.send(Message(unique("ConsoleProducers"), b"hello"))
        rows = api.get("/api/producers")["groups"]
        mine = [g for g in rows if g["group"] == group]
        assert len(mine) == 1
        assert [(i["client_id"], i["language"]) for i in mine[0]["instances"]] == [
            (producer.client_id, "PYTHON")
        ]


def test_a_group_page_starts_its_lag_chart(api: ApiClient) -> None:
    group = unique("console_watched")
    chart = api.get(f"/api/group?name={group}")["lag_chart"]
    assert chart["samples"] == 1
    assert chart["last"] == {"lag": 0.0}
    assert list(chart["series"]) == ["lag"]


def test_bad_requests_and_missing_things(target: ClusterTarget, api: ApiClient) -> None:
    host, port = target.broker_addr.split(":")
    beyond = encode_offset_msg_id(socket.inet_aton(host), int(port), 1 << 40)  # past its end
    for path, code in [("/api/topic", 400), ("/api/message?id=" + beyond, 404)]:
        with pytest.raises(urllib.error.HTTPError) as refused:
            api.get(path)
        assert refused.value.code == code, path


def test_a_dead_name_server_is_reported_not_waited_for() -> None:
    with socket.socket() as refusing:
        refusing.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        process = ConsoleProcess(f"127.0.0.1:{refusing.getsockname()[1]}").wait_ready()
        try:
            api = ApiClient(process.url)
            started = time.monotonic()
            assert "name server" in api.get("/api/overview")["error"]
            with pytest.raises(urllib.error.HTTPError) as down:
                api.get("/api/topics")
            assert down.value.code == 502
            assert time.monotonic() - started < 10
        finally:
            process.stop()


def test_topic_attributes_pass_to_the_broker(target: ClusterTarget, api: ApiClient) -> None:
    """RocketMQ 5's attributes: Sidewinder keeps them, a 4.9 broker ignores the field."""
    topic = unique("ConsoleFifo")
    fields = {"name": topic, "cluster": target.cluster_name, "attributes": "+message.type=FIFO"}
    status, answer = api.post("/api/topics/save", fields)
    assert status == 200, answer
    assert len(api.get(f"/api/topic?name={topic}")["queues"]) == 8


def test_a_broker_that_never_answers_shows_as_dead(target: ClusterTarget, api: ApiClient) -> None:
    """A broker registered with the name server whose port accepts and never answers (a hung
    process): the overview lists it as not answering within the call deadline, beside the
    live broker, instead of hanging. The ghost goes when its registering connection closes."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        ghost = f"127.0.0.1:{silent.getsockname()[1]}"
        cluster = unique("GhostCluster")
        data = encode_register_body(
            {
                "filterServerList": [],
                "topicConfigSerializeWrapper": {
                    "dataVersion": {"counter": 1, "timestamp": int(time.time() * 1000)},
                    "topicConfigTable": {},
                },
            },
            False,
        )
        header = RegisterBrokerRequestHeader(
            unique("broker-ghost"), ghost, cluster, ghost, 0, False, zlib.crc32(data) & 0x7FFFFFFF
        )
        remoting = SyncRemotingClient()
        try:
            request = RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext(), data)
            assert remoting.invoke(target.namesrv_addr, request, 10).code == ResponseCode.SUCCESS
            started = time.monotonic()
            overview = api.get("/api/overview")
            took = time.monotonic() - started
            [dead] = overview["clusters"][cluster]
            assert (dead["addr"], dead["alive"]) == (ghost, False)
            assert "timed out" in dead["error"]
            assert overview["clusters"][target.cluster_name][0]["alive"]
            assert took < CALL_TIMEOUT_S + 3
        finally:
            remoting.close()
    with SyncAdmin(target.namesrv_addr) as admin:
        wait_for(
            lambda: cluster not in admin.cluster_info()["clusterAddrTable"], 10, "the ghost to go"
        )


def test_messages_by_time_range(target: ClusterTarget, api: ApiClient) -> None:
    topic = unique("ConsoleRange")
    with Producer(unique("console_producers"), target.namesrv_addr) as producer:
        sent = [producer.send(Message(topic, f"m{n}".encode())) for n in range(3)]
    found = api.get(f"/api/messages?topic={topic}")
    assert found["mode"] == "time"
    assert sorted(m["msg_id"] for m in found["messages"]) == sorted(s.msg_id for s in sent)
    later = (datetime.now() + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    assert api.get(f"/api/messages?topic={topic}&begin={later}")["messages"] == []
    earlier = (datetime.now() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    assert len(api.get(f"/api/messages?topic={topic}&begin={earlier}")["messages"]) == 3

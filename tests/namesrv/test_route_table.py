"""The route table: registration, routes in both JSON forms, expiry, closed channels."""

from __future__ import annotations

from sidewinder.namesrv.route_table import BROKER_EXPIRED_S, RouteTable
from sidewinder.protocol import body


def topic(name: str, queues: int = 4, perm: int = 6) -> dict[str, object]:
    return {
        "topicName": name,
        "readQueueNums": queues,
        "writeQueueNums": queues,
        "perm": perm,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
    }


def register(
    routes: RouteTable,
    name: str,
    addr: str,
    broker_id: int = 0,
    *,
    version: int = 1,
    topics: list[str] = ("T",),
    channel: object = None,
    now: float = 0.0,
) -> object:
    return routes.register_broker(
        cluster="DefaultCluster",
        broker_addr=addr,
        broker_name=name,
        broker_id=broker_id,
        ha_server_addr=addr.replace(":10911", ":10912"),
        topic_configs={t: topic(t) for t in topics},
        data_version={"counter": version, "timestamp": 1},
        filter_servers=[],
        channel=channel,
        now_s=now,
    )


def test_a_master_registers_its_topics_and_a_slave_learns_the_master() -> None:
    routes = RouteTable()
    register(routes, "broker-a", "10.0.0.1:10911", topics=["T", "U"])
    slave = register(routes, "broker-a", "10.0.0.2:10911", broker_id=1, topics=["ignored"])
    assert slave.master_addr == "10.0.0.1:10911" and slave.ha_server_addr == "10.0.0.1:10912"
    route = routes.topic_route("T")
    assert route == {
        "brokerDatas": [
            {
                "brokerAddrs": {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"},
                "brokerName": "broker-a",
                "cluster": "DefaultCluster",
                "enableActingMaster": False,
            }
        ],
        "filterServerTable": {},
        "queueDatas": [
            {
                "brokerName": "broker-a",
                "perm": 6,
                "readQueueNums": 4,
                "topicSysFlag": 0,
                "writeQueueNums": 4,
            }
        ],
    }
    assert routes.topic_route("ignored") is None  # a slave's topics are not routes
    assert routes.all_topics() == ["T", "U"]
    text = body.dumps(route)
    assert '"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}' in text  # fastjson form
    assert '"brokerAddrs":{"0":"10.0.0.1:10911"' in body.dumps(route, fastjson=False)
    assert body.loads(text)["brokerDatas"][0]["brokerAddrs"]["0"] == "10.0.0.1:10911"


def test_unchanged_data_version_skips_topic_updates() -> None:
    routes = RouteTable()
    register(routes, "broker-a", "a:1", topics=["T"], version=1)
    register(routes, "broker-a", "a:1", topics=["T", "New"], version=1)
    assert routes.topic_route("New") is None
    register(routes, "broker-a", "a:1", topics=["T", "New"], version=2)
    assert routes.topic_route("New") is not None


def test_silent_and_disconnected_brokers_leave_the_routes() -> None:
    routes = RouteTable()
    channel_b = object()
    register(routes, "broker-a", "a:1", topics=["T", "OnlyA"], now=0)
    register(routes, "broker-b", "b:1", topics=["T"], channel=channel_b, now=0)
    register(routes, "broker-b", "b:1", topics=["T"], channel=channel_b, now=100)
    assert routes.expire(BROKER_EXPIRED_S + 1) == ["a:1"]
    assert routes.topic_route("OnlyA") is None
    assert [q["brokerName"] for q in routes.topic_route("T")["queueDatas"]] == ["broker-b"]
    assert routes.channel_closed(channel_b) == ["b:1"]
    assert routes.topic_route("T") is None
    assert routes.cluster_info() == {"brokerAddrTable": {}, "clusterAddrTable": {}}


def test_cluster_topics_write_perm_and_delete() -> None:
    routes = RouteTable()
    register(routes, "broker-a", "a:1", topics=["T"])
    routes.register_broker(
        cluster="Other",
        broker_addr="c:1",
        broker_name="broker-c",
        broker_id=0,
        ha_server_addr="",
        topic_configs={"X": topic("X")},
        data_version={},
        filter_servers=[],
        channel=None,
        now_s=0,
    )
    assert routes.topics_of_cluster("DefaultCluster") == ["T"]
    assert routes.topics_of_cluster("Other") == ["X"]
    assert routes.change_write_perm("broker-a", allow=False) == 1
    assert routes.topic_route("T")["queueDatas"][0]["perm"] == 4
    assert routes.change_write_perm("broker-a", allow=True) == 1
    assert routes.topic_route("T")["queueDatas"][0]["perm"] == 6
    routes.delete_topic("T")
    assert routes.topic_route("T") is None
    topics, addr = routes.system_topics()
    assert topics == ["DefaultCluster", "Other", "broker-a", "broker-c"] and addr in ("a:1", "c:1")

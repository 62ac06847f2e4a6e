"""Routes as the client reads them: a broker group without a master takes no writes."""

from __future__ import annotations

import json

from sidewinder.client.route_cache import MessageQueue, parse_route


def route(broker_addrs: dict[str, dict[str, str]]) -> bytes:
    return json.dumps(
        {
            "brokerDatas": [
                {"cluster": "DefaultCluster", "brokerName": name, "brokerAddrs": addrs}
                for name, addrs in broker_addrs.items()
            ],
            "queueDatas": [
                {"brokerName": name, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}
                for name in broker_addrs
            ],
        }
    ).encode()


def test_both_groups_with_masters_take_writes_and_reads() -> None:
    parsed = parse_route(
        "T", route({"broker-a": {"0": "a:1", "1": "a:2"}, "broker-b": {"0": "b:1"}})
    )
    expected = [MessageQueue("T", n, i) for n in ("broker-a", "broker-b") for i in range(2)]
    assert parsed.write_queues == expected
    assert parsed.read_queues == expected


def test_a_group_left_with_its_slave_is_read_but_not_written() -> None:
    """As the Java client's topicRouteData2TopicPublishInfo: sends go to broker-b."""
    parsed = parse_route("T", route({"broker-a": {"1": "a:2"}, "broker-b": {"0": "b:1"}}))
    assert parsed.write_queues == [MessageQueue("T", "broker-b", i) for i in range(2)]
    assert [q.broker_name for q in parsed.read_queues] == ["broker-a"] * 2 + ["broker-b"] * 2
    assert parsed.master("broker-a") is None

"""CK and ACK records: RocketMQ 5's JSON, read back as its revive service reads them."""

from __future__ import annotations

import json

from sidewinder.broker.pop.records import Ack, CheckPoint


def test_a_checkpoint_in_fastjson_order_and_back() -> None:
    ck = CheckPoint("T", "g", 1, 10, 1000, 3000, "broker-a", diffs=[0, 2, 5])
    raw = ck.to_json()
    assert raw == (
        b'{"bm":0,"bn":"broker-a","c":"g","d":[0,2,5],"it":3000,"n":3,"pt":1000,"q":1,'
        b'"reviveTime":4000,"ro":0,"so":10,"t":"T"}'
    )
    back = CheckPoint.from_json(raw)
    assert back == ck
    assert [back.index_of(o) for o in (10, 12, 15, 11, 9)] == [0, 1, 2, -1, -1]
    assert back.offset_at(2) == 15
    assert ck.unique_id() == "T@1@10@g@1000@broker-a@ck"


def test_an_old_checkpoint_without_diffs_lists_consecutive_offsets() -> None:
    old = CheckPoint.from_json(
        json.dumps({"so": 4, "pt": 1, "it": 2, "n": 3, "q": 0, "t": "T", "c": "g"})
    )
    assert [old.offset_at(i) for i in range(old.num)] == [4, 5, 6]
    assert old.broker_name == ""


def test_acks_single_and_batch() -> None:
    ack = Ack("T", "g", 0, 10, 12, 1000, "b")
    assert json.loads(ack.to_json()) == {
        "ao": 12,
        "bn": "b",
        "c": "g",
        "pt": 1000,
        "q": 0,
        "so": 10,
        "t": "T",
    }
    assert ack.tag == "ack" and ack.acked_offsets() == [12]
    batch = Ack("T", "g", 0, 10, -1, 1000, "b", [10, 11])
    value = json.loads(batch.to_json())
    assert (value["aol"], value["ao"], batch.tag) == ([10, 11], -1, "bAck")
    assert Ack.from_json(batch.to_json(), batch=True).acked_offsets() == [10, 11]
    assert ack.merge_key == CheckPoint("T", "g", 0, 10, 1000, 1, "b").merge_key

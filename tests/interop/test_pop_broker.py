"""POP consumption over raw remoting requests (RocketMQ 5.3.2's codes): pop, ack, change of
invisible time, revive, long polling, refusals; against a running broker."""

from __future__ import annotations

import base64
import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from interop.target import POP_KINDS, ClusterTarget, create_target
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.message import MessageConst
from sidewinder.protocol.pop import (
    POLLING_TIMEOUT,
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_POP_CK,
    PopRequestCode,
    pop_retry_topic,
    revive_topic,
)
from sidewinder.protocol.record import MessageRecord, decode_record
from sidewinder.remoting.client import SyncRemotingClient
from sidewinder.remoting.codec import FrameDecoder, encode_frame
from tests.helpers import pull_request, send_request, unique
from tests.interop.pop_requests import (
    Popped,
    ack_request,
    change_invisible_request,
    changed_handle,
    create_group_request,
    create_topic_request,
    pop_request,
    popped,
    query_offset_request,
)

# A store's own broker (DLQ, kill -9): short offset flushes, so what a test waited for is on disk.
CONF = {"flushConsumerOffsetInterval": 1000}


def _offsets_on_disk(target: ClusterTarget, topic: str, group: str, offset: int) -> None:
    """Wait until consumerOffset.json holds the group's offset `offset` of `topic`'s queue 0 (a
    broker writes it every flushConsumerOffsetInterval, RocketMQ's first time 10 s after its
    start)."""
    path = target.store_path / "config" / "consumerOffset.json"
    deadline = time.monotonic() + 20
    while True:
        if path.exists():
            table = body.loads(path.read_text()).get("offsetTable") or {}
            if str((table.get(f"{topic}@{group}") or {}).get("0")) == str(offset):
                return
        assert time.monotonic() < deadline, f"no offset {offset} of {topic}@{group} in {path}"
        time.sleep(0.2)


def _setup(client: SyncRemotingClient, target: ClusterTarget, queues: int = 2) -> tuple[str, str]:
    topic, group = unique("PopTopic"), unique("PopGroup")
    for request in (create_topic_request(topic, queues), create_group_request(group, 3)):
        reply = client.invoke(target.broker_addr, request, 10)
        assert reply.code == ResponseCode.SUCCESS, reply
    return topic, group


def _send(
    client: SyncRemotingClient, target: ClusterTarget, topic: str, *bodies: bytes, queues: int = 2
) -> None:
    """Send, then wait until the queues hold what was sent: RocketMQ answers a send before it
    dispatches the message to its queue, and a pop right after may not see it yet."""
    ends: dict[int, int] = {}
    for i, payload in enumerate(bodies):
        request = send_request(topic, payload, queue_id=i % queues)
        reply = client.invoke(target.broker_addr, request, 10)
        assert reply.code == ResponseCode.SUCCESS, reply
        ends[i % queues] = int((reply.ext_fields or {})["queueOffset"]) + 1
    deadline = time.monotonic() + 5
    for queue_id, end in ends.items():
        fields = {"topic": topic, "queueId": str(queue_id)}
        while True:
            got = client.invoke(
                target.broker_addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, fields), 5
            )
            if int((got.ext_fields or {}).get("offset", "0")) >= end:
                break
            assert time.monotonic() < deadline, got
            time.sleep(0.02)


def _pop(
    client: SyncRemotingClient, target: ClusterTarget, topic: str, group: str, **fields: object
) -> list[Popped]:
    reply = client.invoke(target.broker_addr, pop_request(topic, group, **fields), 30)  # type: ignore[arg-type]
    assert reply.code in (ResponseCode.SUCCESS, POLLING_TIMEOUT), reply
    return popped(reply, topic, target.broker_name)


def _pop_until(
    client: SyncRemotingClient,
    target: ClusterTarget,
    topic: str,
    group: str,
    count: int,
    seconds: float,
    **fields: object,
) -> tuple[list[Popped], float]:
    """Pop until `count` messages came back; them and when the last came (monotonic)."""
    got: list[Popped] = []
    deadline = time.monotonic() + seconds
    while len(got) < count:
        assert time.monotonic() < deadline, f"{len(got)} of {count} messages back"
        got += _pop(client, target, topic, group, **fields)
        if len(got) < count:
            time.sleep(0.1)
    return got, time.monotonic()


def _committed_offset(
    client: SyncRemotingClient,
    target: ClusterTarget,
    topic: str,
    group: str,
    queue_id: int,
    expected: str,
) -> str | None:
    """The group's offset once it reads `expected`, or what it reads after 5 s: RocketMQ 5.3.2
    commits a pop's offset from its buffer-merge thread, a few ms after the reply."""
    deadline = time.monotonic() + 5
    while True:
        reply = client.invoke(target.broker_addr, query_offset_request(topic, group, queue_id), 5)
        offset = (reply.ext_fields or {}).get("offset")
        if offset == expected or time.monotonic() > deadline:
            return offset
        time.sleep(0.05)


def test_pop_takes_what_was_sent_and_moves_the_offsets(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    topic, group = _setup(client, pop_target)
    _send(client, pop_target, topic, b"m0", b"m1", b"m2", b"m3")
    reply = client.invoke(pop_target.broker_addr, pop_request(topic, group), 10)
    assert reply.code == ResponseCode.SUCCESS, reply
    ext = reply.ext_fields or {}
    assert {"popTime", "invisibleTime", "reviveQid", "restNum"} <= set(ext)
    assert ext["invisibleTime"] == "3000" and ext["restNum"] == "0"
    starts = sorted(ext["startOffsetInfo"].split(";"))
    assert starts == ["0 0 0", "0 1 0"]
    assert sorted(ext["msgOffsetInfo"].split(";")) == ["0 0 0,1", "0 1 0,1"]
    msgs = popped(reply, topic, pop_target.broker_name)
    assert sorted(m.body for m in msgs) == [b"m0", b"m1", b"m2", b"m3"]
    for queue_id in (0, 1):
        assert _committed_offset(client, pop_target, topic, group, queue_id, "2") == "2"
    # Invisible now: a second pop finds nothing.
    again = client.invoke(pop_target.broker_addr, pop_request(topic, group), 10)
    assert again.code == POLLING_TIMEOUT, again
    assert again.remark == "NO_MESSAGE_IN_QUEUE"


def test_checkpoints_land_in_the_revive_topic_in_rocketmq_json(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    topic, group = _setup(client, pop_target, queues=1)
    _send(client, pop_target, topic, b"a", b"b", queues=1)
    reply = client.invoke(pop_target.broker_addr, pop_request(topic, group, invisible_ms=1500), 10)
    msgs = popped(reply, topic, pop_target.broker_name)
    assert len(msgs) == 2
    revive_qid = int((reply.ext_fields or {})["reviveQid"])
    pop_time = int((reply.ext_fields or {})["popTime"])
    deadline = time.monotonic() + 10
    while not (records := _revive_records(client, pop_target, revive_qid, "ck", topic)):
        assert time.monotonic() < deadline, "no CK in the revive topic"
        time.sleep(0.2)
    record, ck = records[0]
    assert {"so", "pt", "it", "bm", "n", "q", "t", "c", "ro", "d", "bn"} <= set(ck)
    assert (ck["so"], ck["pt"], ck["it"], ck["bm"], ck["n"]) == (0, pop_time, 1500, 0, 2)
    assert (ck["q"], ck["t"], ck["c"], ck["d"], ck["bn"]) == (
        0,
        topic,
        group,
        [0, 1],
        pop_target.broker_name,
    )
    assert record.properties()[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == (
        f"{topic}@0@0@{group}@{pop_time}@{pop_target.broker_name}@ck"
    )


def test_unacked_messages_come_back_with_a_reconsume_more(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    topic, group = _setup(client, pop_target)
    _send(client, pop_target, topic, b"x")
    first = _pop(client, pop_target, topic, group, invisible_ms=2000)
    assert [m.body for m in first] == [b"x"]
    popped_at = time.monotonic()
    back, at = _pop_until(client, pop_target, topic, group, 1, 15, invisible_ms=2000)
    assert at - popped_at >= 2.0  # invisible until its time ran out
    assert at - popped_at < 2.0 + 7.0, at - popped_at  # RocketMQ: 2-6 s late
    (msg,) = back
    assert msg.body == b"x" and msg.record.topic == topic
    assert msg.record.reconsume_times == 1
    assert msg.properties[PROPERTY_FIRST_POP_TIME] == str(first[0].extra.pop_time)
    assert msg.properties[PROPERTY_POP_CK] == msg.handle
    assert msg.extra.retry == "1"  # from the V1 retry topic
    assert msg.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == first[
        0
    ].properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    # Acked from the retry topic: gone for good.
    reply = client.invoke(pop_target.broker_addr, ack_request(msg, topic, group), 5)
    assert reply.code == ResponseCode.SUCCESS, reply
    assert reply.ext_fields is None or "extraInfo" not in reply.ext_fields
    time.sleep(2.0 + 4.0)
    assert _pop(client, pop_target, topic, group) == []
    assert client.invoke(
        pop_target.broker_addr, query_offset_request(pop_retry_topic(topic, group), group, 0), 5
    ).ext_fields == {"offset": "1"}


def test_acked_messages_never_come_back(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    topic, group = _setup(client, pop_target)
    _send(client, pop_target, topic, b"k0", b"k1", b"k2")
    msgs = _pop(client, pop_target, topic, group, invisible_ms=1500)
    assert len(msgs) == 3
    for msg in msgs[:2]:
        reply = client.invoke(pop_target.broker_addr, ack_request(msg, topic, group), 5)
        assert reply.code == ResponseCode.SUCCESS, reply
    back, _ = _pop_until(client, pop_target, topic, group, 1, 12)
    assert [m.body for m in back] == [msgs[2].body]
    time.sleep(1.0)
    assert _pop(client, pop_target, topic, group) == []


def test_change_invisible_time_gives_a_new_handle(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    topic, group = _setup(client, pop_target)
    _send(client, pop_target, topic, b"c")
    (msg,) = _pop(client, pop_target, topic, group, invisible_ms=1500)
    reply = client.invoke(
        pop_target.broker_addr, change_invisible_request(msg, topic, group, 8000), 5
    )
    assert reply.code == ResponseCode.SUCCESS, reply
    ext = reply.ext_fields or {}
    assert ext["invisibleTime"] == "8000" and ext["reviveQid"] == str(msg.extra.revive_qid)
    assert int(ext["popTime"]) >= msg.extra.pop_time
    # Not back when the first invisible time (and RocketMQ's lateness) has run out.
    time.sleep(5.0)
    assert _pop(client, pop_target, topic, group) == []
    renewed = Popped(msg.record, changed_handle(reply, msg), msg.properties)
    acked = client.invoke(pop_target.broker_addr, ack_request(renewed, topic, group), 5)
    assert acked.code == ResponseCode.SUCCESS, acked
    time.sleep(8.0 - 5.0 + 4.0)
    assert _pop(client, pop_target, topic, group) == []


def test_a_send_wakes_a_held_pop(pop_target: ClusterTarget, client: SyncRemotingClient) -> None:
    topic, group = _setup(client, pop_target)
    _send(client, pop_target, topic, b"warm")  # the group's offsets start at the queues' ends
    assert len(_pop(client, pop_target, topic, group)) == 1
    held = SyncRemotingClient()
    try:
        with ThreadPoolExecutor(1) as pool:
            started = time.monotonic()
            future = pool.submit(
                held.invoke, pop_target.broker_addr, pop_request(topic, group, poll_ms=10_000), 15
            )
            time.sleep(0.5)
            _send(client, pop_target, topic, b"late")
            reply = future.result(15)
    finally:
        held.close()
    assert reply.code == ResponseCode.SUCCESS, reply
    assert time.monotonic() - started < 3.0
    assert [m.body for m in popped(reply, topic, pop_target.broker_name)] == [b"late"]


def test_an_empty_held_pop_ends_polling_timeout(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    topic, group = _setup(client, pop_target)
    started = time.monotonic()
    reply = client.invoke(pop_target.broker_addr, pop_request(topic, group, poll_ms=1500), 10)
    took = time.monotonic() - started
    assert reply.code == POLLING_TIMEOUT, reply
    assert 1.2 <= took < 4.0, took


def test_a_stale_pop_is_answered_polling_timeout_at_once(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    topic, group = _setup(client, pop_target)
    _send(client, pop_target, topic, b"s")
    born = int(time.time() * 1000) - 5000
    reply = client.invoke(
        pop_target.broker_addr, pop_request(topic, group, poll_ms=1000, born_ms=born), 5
    )
    assert reply.code == POLLING_TIMEOUT, reply
    assert "pop message is timeout too much" in (reply.remark or "")


def test_acks_rocketmq_takes_without_a_match_are_success(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    topic, group = _setup(client, pop_target)
    _send(client, pop_target, topic, b"a")
    (msg,) = _pop(client, pop_target, topic, group)
    made_up = Popped(msg.record, f"0 {int(time.time() * 1000)} 3000 1 0 nobody 0 0", {})
    for ack in (
        ack_request(msg, topic, group),
        ack_request(msg, topic, group),
        ack_request(msg, topic, unique("OtherGroup")),
        ack_request(made_up, topic, group),
    ):
        reply = client.invoke(pop_target.broker_addr, ack, 5)
        assert reply.code == ResponseCode.SUCCESS, reply


def test_dead_letters_after_max_attempts(tmp_path: Path, client: SyncRemotingClient) -> None:
    """retryMaxTimes 1: two deliveries, then %DLQ%group. Ours only: RocketMQ 5.3.2's broker
    retries for ever, its proxy dead-letters at the next receive."""
    target = create_target("sidewinder", tmp_path, CONF).start()
    try:
        topic, group = unique("PopDlq"), unique("PopDlqGroup")
        client.invoke(target.broker_addr, create_topic_request(topic, 1), 10)
        client.invoke(target.broker_addr, create_group_request(group, 1), 10)
        _send(client, target, topic, b"doomed", queues=1)
        assert len(_pop(client, target, topic, group, invisible_ms=1000)) == 1
        back, _ = _pop_until(client, target, topic, group, 1, 12, invisible_ms=1000)
        assert back[0].record.reconsume_times == 1
        dlq = f"%DLQ%{group}"
        deadline = time.monotonic() + 12
        while True:
            reply = client.invoke(target.broker_addr, pull_request(dlq, unique("DlqReader")), 5)
            if reply.code == ResponseCode.SUCCESS:
                break
            assert time.monotonic() < deadline, reply
            time.sleep(0.3)
        record = decode_record(bytes(reply.body or b""), 0)
        assert isinstance(record, MessageRecord)
        assert bytes(record.body) == b"doomed" and record.reconsume_times == 2
        assert _pop(client, target, topic, group) == []
    finally:
        target.stop()


# RocketMQ 5.3.2 refuses the first two as we do; the rest it takes (measured): a count of 0, a
# negative or unparsable invisible time or a queue id below -1 pop nothing, invisibly or not,
# and a missing group fails with a NullPointerException. We refuse each, naming the field.
BAD_POPS = [
    ({"maxMsgNums": "33"}, (29, "greater than 32"), (29, "greater than 32")),
    ({"queueId": "7"}, (29, "queueId[7] is illegal"), (29, "queueId[7] is illegal")),
    ({"maxMsgNums": "0"}, (29, "maxMsgNums 0"), (POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE")),
    ({"invisibleTime": "-5"}, (29, "invisibleTime -5"), (POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE")),
    ({"queueId": "-2"}, (29, "queueId[-2] is illegal"), (POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE")),
    (
        {"invisibleTime": "soon"},
        (ResponseCode.SYSTEM_ERROR, "invisibleTime"),
        (POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE"),
    ),
    (
        {"consumerGroup": None},
        (ResponseCode.SYSTEM_ERROR, "consumerGroup"),
        (ResponseCode.SYSTEM_ERROR, "NullPointerException"),
    ),
]


@pytest.mark.parametrize(("fields", "ours", "rocketmq5"), BAD_POPS)
def test_bad_pop_headers(
    pop_target: ClusterTarget,
    client: SyncRemotingClient,
    fields: dict[str, str | None],
    ours: tuple[int, str],
    rocketmq5: tuple[int, str],
) -> None:
    topic, group = _setup(client, pop_target)
    request = pop_request(topic, group)
    ext = dict(request.ext_fields or {})
    for name, value in fields.items():
        if value is None:
            ext.pop(name, None)
        else:
            ext[name] = value
    request.ext_fields = ext
    reply = client.invoke(pop_target.broker_addr, request, 5)
    code, words = rocketmq5 if pop_target.kind == "rocketmq5" else ours
    assert reply.code == code, reply
    assert words in (reply.remark or ""), reply.remark


def test_malformed_handles_are_refused(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    topic, group = _setup(client, pop_target)
    _send(client, pop_target, topic, b"h")
    (msg,) = _pop(client, pop_target, topic, group)
    for handle, words in (
        ("", "1 fields"),
        ("1 2 3", "3 fields"),
        ("x 1 1 1 0 b 0 0", "not a number"),
    ):
        fields = ack_request(msg, topic, group).ext_fields or {}
        request = ack_request(msg, topic, group)
        request.ext_fields = dict(fields) | {"extraInfo": handle}
        reply = client.invoke(pop_target.broker_addr, request, 5)
        if pop_target.kind == "rocketmq5":  # an exception's text, as a system error
            assert reply.code == ResponseCode.SYSTEM_ERROR, reply
            assert "Exception" in (reply.remark or ""), reply.remark
        else:
            assert reply.code == 29, reply
            assert words in (reply.remark or ""), reply.remark
    unknown = ack_request(msg, unique("NoSuchTopic"), group)
    reply = client.invoke(pop_target.broker_addr, unknown, 5)
    assert reply.code == ResponseCode.TOPIC_NOT_EXIST, reply


@pytest.mark.parametrize("kind", POP_KINDS)
def test_a_killed_broker_keeps_its_pops(
    kind: str, tmp_path: Path, client: SyncRemotingClient
) -> None:
    """kill -9 under SYNC_FLUSH with four messages popped and two acked: after the restart the
    two acked never come back, the two others do, each once."""
    conf = CONF | {"flushDiskType": "SYNC_FLUSH"}
    target = create_target(kind, tmp_path, conf, routed=False).start()
    try:
        topic, group = unique("PopKill"), unique("PopKillGroup")
        for request in (create_topic_request(topic, 1), create_group_request(group)):
            assert client.invoke(target.broker_addr, request, 10).code == ResponseCode.SUCCESS
        _send(client, target, topic, b"k0", b"k1", b"k2", b"k3", queues=1)
        msgs = _pop(client, target, topic, group, invisible_ms=4000)
        assert sorted(m.body for m in msgs) == [b"k0", b"k1", b"k2", b"k3"]
        for msg in msgs[:2]:
            reply = client.invoke(target.broker_addr, ack_request(msg, topic, group), 5)
            assert reply.code == ResponseCode.SUCCESS, reply
        _offsets_on_disk(target, topic, group, 4)
        target.kill_broker()
        target.start_broker()
        back, _ = _pop_until(client, target, topic, group, 2, 40)
        assert sorted(m.body for m in back) == sorted(m.body for m in msgs[2:])
        for msg in back:
            assert client.invoke(target.broker_addr, ack_request(msg, topic, group), 5).code == 0
        time.sleep(3.0)
        assert _pop(client, target, topic, group) == []
    finally:
        target.kill()  # nothing reads its store; a 5.3.2 broker takes 10-30 s to stop


def _revive_records(
    client: SyncRemotingClient, target: ClusterTarget, revive_qid: int, tag: str, topic: str
) -> list[tuple[MessageRecord, dict[str, object]]]:
    """The records of one tag for `topic` in a revive queue, read as RocketMQ reads them."""
    found = []
    pulled = client.invoke(
        target.broker_addr,
        pull_request(
            revive_topic(target.cluster_name), unique("ReviveReader"), queue_id=revive_qid
        ),
        10,
    )
    data, at = bytes(pulled.body or b""), 0
    while at < len(data):
        record = decode_record(data, at)
        assert isinstance(record, MessageRecord)
        at += record.total_size
        if record.properties().get(MessageConst.TAGS) == tag:
            value = json.loads(bytes(record.body))
            if value.get("t") == topic:
                found.append((record, value))
    return found


def test_a_batch_ack_clears_the_messages_it_names(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    topic, group = _setup(client, pop_target, queues=1)
    _send(client, pop_target, topic, b"b0", b"b1", b"b2", queues=1)
    reply = client.invoke(pop_target.broker_addr, pop_request(topic, group, invisible_ms=1500), 10)
    msgs = popped(reply, topic, pop_target.broker_name)
    assert [m.body for m in msgs] == [b"b0", b"b1", b"b2"]
    extra = msgs[0].extra
    bits = base64.b64encode(bytes([0b011])).decode()  # java.util.BitSet {0, 1}
    body = {
        "acks": [
            {
                "c": group,
                "t": topic,
                "r": "0",
                "so": extra.ck_queue_offset,
                "q": extra.queue_id,
                "rq": extra.revive_qid,
                "pt": extra.pop_time,
                "it": extra.invisible_time,
                "b": bits,
            }
        ],
        "brokerName": pop_target.broker_name,
    }
    request = RemotingCommand.request(
        PopRequestCode.BATCH_ACK_MESSAGE, {}, body=json.dumps(body).encode()
    )
    acked = client.invoke(pop_target.broker_addr, request, 5)
    assert acked.code == ResponseCode.SUCCESS, acked
    back, _ = _pop_until(client, pop_target, topic, group, 1, 12)
    assert [m.body for m in back] == [b"b2"]
    ((record, value),) = _revive_records(client, pop_target, extra.revive_qid, "bAck", topic)
    # RocketMQ names a batch ack's record as it names a single ack's (genAckUniqueId).
    assert record.properties()[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == (
        f"{topic}@0@-1@{group}@{extra.pop_time}@{pop_target.broker_name}@ack"
    )
    assert value["aol"] == [0, 1] and value["ao"] == -1
    assert (value["c"], value["q"], value["so"], value["pt"]) == (group, 0, 0, extra.pop_time)
    empty = RemotingCommand.request(PopRequestCode.BATCH_ACK_MESSAGE, {}, body=b'{"acks":[]}')
    assert client.invoke(pop_target.broker_addr, empty, 5).code == ResponseCode.NO_MESSAGE


def _invoke_together(
    target: ClusterTarget, requests: list[RemotingCommand]
) -> dict[int, RemotingCommand]:
    """Write `requests` in one write on a connection of their own, as a 5.x client writes the
    acks of a pop; their replies by opaque."""
    with socket.create_connection(target.broker_addr.split(":")) as sock:
        sock.settimeout(10)
        sock.sendall(b"".join(encode_frame(request) for request in requests))
        decoder, replies = FrameDecoder(), {}
        while len(replies) < len(requests):
            chunk = sock.recv(1 << 16)
            assert chunk, "the broker closed the connection"
            decoder.feed(chunk)
            replies.update((reply.opaque, reply) for reply in decoder.commands())
    return replies


def test_acks_written_together_clear_exactly_their_messages(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    """Acks of one pop in one write (and one for a message of another pop): their records in
    the revive queue name exactly the acked offsets of each check point. RocketMQ writes one
    record per ack; Sidewinder one per check point ("bAck" for several), read the same way."""
    topic, group = _setup(client, pop_target, queues=1)
    _send(client, pop_target, topic, b"t0", b"t1", b"t2", b"t3", queues=1)
    first = _pop(client, pop_target, topic, group, invisible_ms=1500, max_msg_nums=3)
    second = _pop(client, pop_target, topic, group, invisible_ms=1500, max_msg_nums=3)
    assert [m.body for m in first + second] == [b"t0", b"t1", b"t2", b"t3"]
    acks = [ack_request(m, topic, group) for m in (first[0], first[2], second[0])]
    replies = _invoke_together(pop_target, acks)
    assert [replies[a.opaque].code for a in acks] == [ResponseCode.SUCCESS] * 3, replies
    back, _ = _pop_until(client, pop_target, topic, group, 1, 12)
    assert [m.body for m in back] == [b"t1"]
    # The records came due with the check points (the message came back after both).
    records = [
        found
        for revive_qid in {first[0].extra.revive_qid, second[0].extra.revive_qid}
        for tag in ("ack", "bAck")
        for found in _revive_records(client, pop_target, revive_qid, tag, topic)
    ]
    named: dict[int, list[int]] = {}  # a check point's start offset: the offsets acked
    for record, value in records:
        batch = record.properties()[MessageConst.TAGS] == "bAck"
        offsets = value["aol"] if batch else [value["ao"]]
        named.setdefault(int(value["so"]), []).extend(int(o) for o in offsets)
    assert {start: sorted(offsets) for start, offsets in named.items()} == {0: [0, 2], 3: [3]}
    # Ours: the acks of one check point that came together are one record (a store write).
    assert len(records) == (3 if pop_target.kind == "rocketmq5" else 2)


def test_peek_shows_without_taking(pop_target: ClusterTarget, client: SyncRemotingClient) -> None:
    topic, group = _setup(client, pop_target, queues=1)
    fields = {"topic": topic, "queueId": "-1", "maxMsgNums": "32", "consumerGroup": group}
    empty = client.invoke(
        pop_target.broker_addr, RemotingCommand.request(PopRequestCode.PEEK_MESSAGE, fields), 5
    )
    assert (empty.code, empty.remark) == (ResponseCode.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE")
    _send(client, pop_target, topic, b"p0", b"p1", queues=1)
    peeked = client.invoke(
        pop_target.broker_addr, RemotingCommand.request(PopRequestCode.PEEK_MESSAGE, fields), 5
    )
    assert peeked.code == ResponseCode.SUCCESS, peeked
    assert (peeked.ext_fields or {}).get("restNum") == "2"
    data, at, bodies = bytes(peeked.body or b""), 0, []
    while at < len(data):
        record = decode_record(data, at)
        assert isinstance(record, MessageRecord)
        bodies.append(bytes(record.body))
        at += record.total_size
    assert bodies == [b"p0", b"p1"]
    assert [m.body for m in _pop(client, pop_target, topic, group)] == [b"p0", b"p1"]


def test_notification_says_whether_there_is_a_message(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    topic, group = _setup(client, pop_target)

    def notify(poll_ms: int) -> RemotingCommand:
        fields = {
            "consumerGroup": group,
            "topic": topic,
            "queueId": "-1",
            "pollTime": str(poll_ms),
            "bornTime": str(int(time.time() * 1000)),
        }
        return client.invoke(
            pop_target.broker_addr, RemotingCommand.request(PopRequestCode.NOTIFICATION, fields), 10
        )

    started = time.monotonic()
    nothing = notify(1000)
    assert nothing.code == ResponseCode.SUCCESS, nothing
    assert (nothing.ext_fields or {}).get("hasMsg") == "false"
    assert time.monotonic() - started >= 0.8
    _send(client, pop_target, topic, b"n")
    something = notify(1000)
    assert (something.ext_fields or {}).get("hasMsg") == "true", something


def test_polling_info_counts_held_pops(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    topic, group = _setup(client, pop_target)
    fields = {"consumerGroup": group, "topic": topic, "queueId": "-1"}
    info = RemotingCommand.request(PopRequestCode.POLLING_INFO, fields)
    assert (client.invoke(pop_target.broker_addr, info, 5).ext_fields or {})["pollingNum"] == "0"
    held = SyncRemotingClient()
    try:
        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(
                held.invoke, pop_target.broker_addr, pop_request(topic, group, poll_ms=3000), 10
            )
            deadline = time.monotonic() + 3
            while True:
                reply = client.invoke(
                    pop_target.broker_addr,
                    RemotingCommand.request(PopRequestCode.POLLING_INFO, fields),
                    5,
                )
                if (reply.ext_fields or {}).get("pollingNum") == "1":
                    break
                assert time.monotonic() < deadline, reply
                time.sleep(0.1)
            assert future.result(10).code == POLLING_TIMEOUT
    finally:
        held.close()


@pytest.mark.parametrize(
    ("first", "second"),
    [("sidewinder", "rocketmq5"), ("rocketmq5", "sidewinder")],
    ids=lambda kind: str(kind),
)
def test_the_other_broker_takes_over_pops_in_flight(
    first: str, second: str, tmp_path: Path, client: SyncRemotingClient
) -> None:
    """Four popped and two acked on one kind, which is then killed (SYNC_FLUSH, CK and ACK
    records still in the timer); a broker of the other kind started on the same store brings
    back the two others, once each, and never the acked ones."""
    conf = CONF | {
        "flushDiskType": "SYNC_FLUSH",
        "storePathRootDir": str(tmp_path / "store"),
        "storePathCommitLog": str(tmp_path / "store" / "commitlog"),
        "brokerName": "pop-takeover",
        "brokerClusterName": "PopCluster",
    }
    topic, group = unique("PopTakeover"), unique("PopTakeoverGroup")
    before = create_target(first, tmp_path / first, conf, routed=False).start()
    try:
        for request in (create_topic_request(topic, 1), create_group_request(group)):
            assert client.invoke(before.broker_addr, request, 10).code == ResponseCode.SUCCESS
        _send(client, before, topic, b"t0", b"t1", b"t2", b"t3", queues=1)
        # Long enough that nothing is revived before the kill (RocketMQ writes its offsets
        # first 10 s after its start).
        msgs = _pop(client, before, topic, group, invisible_ms=15_000)
        assert sorted(m.body for m in msgs) == [b"t0", b"t1", b"t2", b"t3"]
        for msg in msgs[:2]:
            assert client.invoke(before.broker_addr, ack_request(msg, topic, group), 5).code == 0
        _offsets_on_disk(before, topic, group, 4)
        # RocketMQ 5.3.2 writes its timer wheel and timer checkpoint once a second: killed
        # sooner, under the suite's load, its acks were sometimes not yet in its timer files.
        time.sleep(2.5)
    finally:
        before.kill()
    after = create_target(second, tmp_path / second, conf, routed=False).start()
    try:
        back, _ = _pop_until(client, after, topic, group, 2, 60)
        assert sorted(m.body for m in back) == sorted(m.body for m in msgs[2:])
        for msg in back:
            assert client.invoke(after.broker_addr, ack_request(msg, topic, group), 5).code == 0
        time.sleep(3.0)
        assert _pop(client, after, topic, group) == []
    finally:
        after.kill()  # nothing reads its store; a 5.3.2 broker takes 10-30 s to stop


def _ack_all(
    client: SyncRemotingClient, target: ClusterTarget, msgs: list[Popped], topic: str, group: str
) -> None:
    for msg in msgs:
        reply = client.invoke(target.broker_addr, ack_request(msg, topic, group), 5)
        assert reply.code == ResponseCode.SUCCESS, reply


def test_an_orderly_pop_blocks_the_queue_until_acked(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    topic, group = _setup(client, pop_target, queues=1)
    _send(client, pop_target, topic, b"o0", b"o1", b"o2", b"o3", queues=1)
    reply = client.invoke(
        pop_target.broker_addr, pop_request(topic, group, max_msg_nums=2, order=True), 10
    )
    assert reply.code == ResponseCode.SUCCESS, reply
    ext = reply.ext_fields or {}
    assert ext["reviveQid"] == "999" and ext["orderCountInfo"] == "0 0 0", ext
    first = popped(reply, topic, pop_target.broker_name)
    assert [m.body for m in first] == [b"o0", b"o1"]
    assert _pop(client, pop_target, topic, group, order=True) == []  # blocked
    _ack_all(client, pop_target, first[:1], topic, group)
    offset = client.invoke(pop_target.broker_addr, query_offset_request(topic, group, 0), 5)
    assert (offset.ext_fields or {}).get("offset") == "1"
    assert _pop(client, pop_target, topic, group, order=True) == []  # o1 still out
    _ack_all(client, pop_target, first[1:], topic, group)
    second = _pop(client, pop_target, topic, group, order=True)
    assert [m.body for m in second] == [b"o2", b"o3"]
    _ack_all(client, pop_target, second, topic, group)
    offset = client.invoke(pop_target.broker_addr, query_offset_request(topic, group, 0), 5)
    assert (offset.ext_fields or {}).get("offset") == "4"


def test_an_unacked_orderly_message_comes_first_again(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    topic, group = _setup(client, pop_target, queues=1)
    _send(client, pop_target, topic, b"f0", b"f1", queues=1)
    fields = {"max_msg_nums": 1, "order": True, "invisible_ms": 1500}
    (msg,) = _pop(client, pop_target, topic, group, **fields)
    assert msg.body == b"f0"
    popped_at = time.monotonic()
    deadline = popped_at + 10
    while True:
        reply = client.invoke(pop_target.broker_addr, pop_request(topic, group, **fields), 10)  # type: ignore[arg-type]
        if reply.code == ResponseCode.SUCCESS:
            break
        assert time.monotonic() < deadline, reply
        time.sleep(0.1)
    assert time.monotonic() - popped_at >= 1.4
    (again,) = popped(reply, topic, pop_target.broker_name)
    assert again.body == b"f0"
    assert (reply.ext_fields or {})["orderCountInfo"] == "0 qo0%0 1;0 0 1"


def test_a_retried_orderly_pop_with_its_attempt_id_gets_its_batch(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    topic, group = _setup(client, pop_target, queues=1)
    _send(client, pop_target, topic, b"r0", b"r1", queues=1)
    fields = {"max_msg_nums": 1, "order": True, "attempt_id": "attempt-1"}
    assert [m.body for m in _pop(client, pop_target, topic, group, **fields)] == [b"r0"]
    assert [m.body for m in _pop(client, pop_target, topic, group, **fields)] == [b"r0"]
    other = fields | {"attempt_id": "attempt-2"}
    assert _pop(client, pop_target, topic, group, **other) == []


def test_a_tag_filtered_pop_skips_the_others_for_good(
    pop_target: ClusterTarget, client: SyncRemotingClient
) -> None:
    topic, group = _setup(client, pop_target, queues=1)
    for payload, tag in ((b"a", "TagA"), (b"b", "TagB"), (b"c", "TagC")):
        properties = {"TAGS": tag, "WAIT": "true"}
        request = send_request(topic, payload, properties=properties)
        assert client.invoke(pop_target.broker_addr, request, 10).code == ResponseCode.SUCCESS
    deadline = time.monotonic() + 5
    while True:
        fields = {"exp": "TagA || TagC", "exp_type": "TAG", "invisible_ms": 1500}
        msgs = _pop(client, pop_target, topic, group, **fields)
        if msgs:
            break
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert [m.body for m in msgs] == [b"a", b"c"]
    assert msgs[1].extra.ck_queue_offset == 0 and msgs[1].extra.queue_offset == 2
    assert _committed_offset(client, pop_target, topic, group, 0, "3") == "3"
    _ack_all(client, pop_target, msgs, topic, group)
    time.sleep(1.5 + 3.0)
    assert _pop(client, pop_target, topic, group) == []


@pytest.mark.parametrize("kind", POP_KINDS)
def test_retry_topic_v2(kind: str, tmp_path: Path, client: SyncRemotingClient) -> None:
    """enableRetryTopicV2: an un-acked message is revived into %RETRY%group+topic and comes back
    with retry flag 2 in its handle; an ack by that handle settles it."""
    conf = CONF | {"enableRetryTopicV2": "true"}
    target = create_target(kind, tmp_path, conf, routed=False).start()
    try:
        topic, group = unique("PopV2"), unique("PopV2Group")
        for request in (create_topic_request(topic, 1), create_group_request(group)):
            assert client.invoke(target.broker_addr, request, 10).code == ResponseCode.SUCCESS
        _send(client, target, topic, b"v2", queues=1)
        assert len(_pop(client, target, topic, group, invisible_ms=1000)) == 1
        (back,), _ = _pop_until(client, target, topic, group, 1, 15, invisible_ms=1000)
        assert back.body == b"v2" and back.record.topic == topic
        assert back.extra.retry == "2" and back.record.reconsume_times == 1
        assert back.extra.real_topic(topic, group) == f"%RETRY%{group}+{topic}"
        reply = client.invoke(target.broker_addr, ack_request(back, topic, group), 5)
        assert reply.code == ResponseCode.SUCCESS, reply
        time.sleep(1.0 + 3.0)
        assert _pop(client, target, topic, group) == []
    finally:
        target.kill()

"""Timer messages at a broker in this process (tests/inprocess.py): the timer topic as RocketMQ 5
registers it, sends that must reach it or must not, in milliseconds each."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sidewinder.broker.app import BrokerApp
from sidewinder.broker.topics import TIMER_TOPIC
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.message import MessageConst, encode_properties
from tests.helpers import send_request
from tests.inprocess import InProcessBroker

TOPIC = "TimerPlain"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    root: Path = tmp_path_factory.mktemp("timer-inprocess")
    with InProcessBroker(root) as started:
        started.create_topic(TOPIC, 1)
        yield started


def _send(topic: str, body: bytes, properties: str = "WAIT\x01true") -> RemotingCommand:
    return send_request(topic, body, group="g", properties=properties, default_topic_queue_nums=1)


def _send_batch(topic: str, body: bytes) -> RemotingCommand:
    return send_request(
        topic,
        body,
        code=RequestCode.SEND_BATCH_MESSAGE,
        group="g",
        properties="WAIT\x01true",
        default_topic_queue_nums=1,
        batch=True,
    )


def _batch_body(properties: list[dict[str, str]]) -> bytes:
    """A batch body as MessageDecoder.encodeMessages writes it: each message's own properties."""
    out = b""
    for n, props in enumerate(properties):
        data, encoded = b"m%d" % n, encode_properties(props, trailing=False)
        size = 20 + len(data) + 2 + len(encoded)
        out += struct.pack(">iiiii", size, 0, 0, 0, len(data)) + data
        out += struct.pack(">h", len(encoded)) + encoded
    return out


def _queue_ends(broker: InProcessBroker) -> tuple[int, int]:
    async def read() -> tuple[int, int]:
        assert broker.app is not None
        store = broker.app.store
        await store.caught_up(2)  # dispatched: the queues hold what was stored
        return store.max_offset_in_queue(TIMER_TOPIC, 0), store.max_offset_in_queue(TOPIC, 0)

    return broker.call(read())


def test_the_timer_topic_is_a_system_topic_of_one_queue(broker: InProcessBroker) -> None:
    reply = broker.invoke(RemotingCommand.request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER))
    assert reply.code == ResponseCode.SUCCESS
    assert TIMER_TOPIC in body.loads(reply.body_bytes)["topicList"]
    reply = broker.invoke(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
    table = body.loads(reply.body_bytes)["topicConfigTable"]
    timer = table[TIMER_TOPIC]
    assert (timer["readQueueNums"], timer["writeQueueNums"], timer["perm"]) == (1, 1, 6)


def test_a_send_to_the_timer_topic_is_refused(broker: InProcessBroker) -> None:
    before = _queue_ends(broker)
    out_ms = str(int(time.time() * 1000) // 1000 * 1000)
    forged = f"REAL_TOPIC\x01{TOPIC}\x02REAL_QID\x010\x02TIMER_OUT_MS\x01{out_ms}"
    for request in (
        _send(TIMER_TOPIC, b"x", forged),
        _send_batch(TIMER_TOPIC, _batch_body([{MessageConst.WAIT_STORE_MSG_OK: "true"}])),
    ):
        reply = broker.invoke(request)
        assert reply.code == ResponseCode.NO_PERMISSION
        assert reply.remark == f"Sending message to topic[{TIMER_TOPIC}] is forbidden."
    assert _queue_ends(broker) == before


def test_a_batch_of_timer_messages_waits_in_the_timer_topic(broker: InProcessBroker) -> None:
    """The send lane reads a batch's own properties only; each message's TIMER_DELIVER_MS is in
    the body, so the batch must go the way of `process`, which diverts each of them."""
    timers, plain = _queue_ends(broker)
    later = str(int(time.time() * 1000) + 60_000)
    props = [{MessageConst.TIMER_DELIVER_MS: later, "UNIQ_KEY": f"B{n}"} for n in range(3)]
    reply = broker.invoke(_send_batch(TOPIC, _batch_body(props)))
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert _queue_ends(broker) == (timers + 3, plain)


def test_no_timer_topic_when_the_wheel_is_off(tmp_path: Path) -> None:
    with InProcessBroker(tmp_path, {"timerWheelEnable": "false"}) as off:
        assert isinstance(off.app, BrokerApp)
        assert TIMER_TOPIC not in off.app.topics.topics
        reply = off.invoke(RemotingCommand.request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER))
        assert TIMER_TOPIC not in body.loads(reply.body_bytes)["topicList"]


def test_cleanup_keeps_what_pending_timers_read_and_deletes_delivered_timer_logs(
    tmp_path: Path,
) -> None:
    """fileReservedTime 0: every CommitLog segment is expired, but the one a pending timer
    message is in stays until the message is delivered; then it and the timer log file its
    units filled go."""
    segment = 64 << 10
    conf = {
        "mappedFileSizeCommitLog": str(segment),
        "fileReservedTime": "0",
        "mappedFileSizeTimerLog": "4096",  # 78 units a file
    }
    with InProcessBroker(tmp_path, conf) as broker:
        app = broker.app
        assert app is not None
        broker.create_topic(TOPIC, 1)

        def send(properties: str, data: bytes) -> None:
            request = _send(TOPIC, data, properties + "\x02WAIT\x01true")
            assert broker.invoke(request).code == ResponseCode.SUCCESS

        for _ in range(10):  # past the first segment
            send("KEYS\x01filler", b"f" * 8000)
        due = str(int(time.time() * 1000) + 1500)
        for n in range(100):
            send(f"{MessageConst.TIMER_DELIVER_MS}\x01{due}", b"timer %d" % n)
        for _ in range(30):  # three segments more
            send("KEYS\x01filler", b"f" * 8000)

        async def clean() -> tuple[list[str], int]:
            await app.store.caught_up(2)
            app.store._parts.cleanup.delete_files_manually()
            done = await app.store._parts.cleanup.run_once()
            return done.deleted_segments, app.store._commit_log.files.min_offset

        async def first_timer_message() -> int:
            entry = app.store.queue_entry(TIMER_TOPIC, 0, 0)
            assert entry is not None
            return entry.phy_offset

        timer_phy = broker.call(first_timer_message())
        assert segment <= timer_phy < 2 * segment
        assert broker.call(clean()) == ([f"{0:020d}"], segment)

        deadline = time.monotonic() + 10
        while app.timer.delivered < 100 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert app.timer.delivered == 100

        deleted, min_phy = broker.call(clean())
        assert f"{segment:020d}" in deleted and min_phy > timer_phy
        assert broker.call(app.timer.clean_timer_log()) == [f"{0:020d}"]
        assert sorted(p.name for p in (tmp_path / "store" / "timerlog").iterdir()) == [
            f"{4096:020d}"
        ]

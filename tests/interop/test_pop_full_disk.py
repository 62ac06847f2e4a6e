"""A pop on a full disk (a real small tmpfs): its check point cannot be stored, so nothing is
handed out, the refusal says why, and once there is room again every message is popped.

Sidewinder only: RocketMQ 5.3.2 stores a check point after it answers the pop, so it has no
such refusal to compare with (and its store does not fit a small disk).
"""

from __future__ import annotations

import time
from pathlib import Path

from interop.target import create_target
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import send_request, unique
from tests.interop.pop_requests import (
    create_group_request,
    create_topic_request,
    pop_request,
    popped,
    query_offset_request,
)
from tests.small_disk import fill, small_disk

# Small store files, so the broker fits the disk; a cleanup round (which measures the disk)
# every 200 ms; nothing deleted to make room.
SMALL_STORE = {
    "mappedFileSizeCommitLog": 4 << 20,
    "mappedFileSizeConsumeQueue": 60_000,
    "mappedFileSizeTimerLog": 1 << 20,
    "cleanResourceInterval": 200,
    "cleanFileForciblyEnable": "false",
}


def _until(check: object, seconds: float, what: str) -> RemotingCommand:
    deadline = time.monotonic() + seconds
    while True:
        reply = check()  # type: ignore[operator]
        if reply is not None:
            return reply  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_a_pop_on_a_full_disk_takes_nothing_and_loses_nothing(
    tmp_path: Path, client: SyncRemotingClient
) -> None:
    with small_disk(tmp_path / "disk", mib=64) as disk:
        target = create_target("sidewinder", disk, SMALL_STORE).start()
        try:
            addr = target.broker_addr
            topic, group = unique("PopFull"), unique("PopFullGroup")
            for request in (create_topic_request(topic, 1), create_group_request(group)):
                assert client.invoke(addr, request, 10).code == ResponseCode.SUCCESS
            bodies = [b"f0", b"f1", b"f2"]
            for payload in bodies:
                reply = client.invoke(addr, send_request(topic, payload, queue_id=0), 10)
                assert reply.code == ResponseCode.SUCCESS, reply

            ballast = fill(disk, leave_bytes=2 << 20)  # above RocketMQ's 90 % mark

            def refused() -> RemotingCommand | None:
                reply = client.invoke(addr, send_request(topic, b"probe", queue_id=0), 10)
                return reply if reply.code != ResponseCode.SUCCESS else None

            probe = _until(refused, 10, "sends still taken on a full disk")
            assert "disk full" in (probe.remark or ""), probe
            reply = client.invoke(addr, pop_request(topic, group, invisible_ms=60_000), 10)
            assert reply.code == ResponseCode.SERVICE_NOT_AVAILABLE, reply
            assert "check point" in (reply.remark or ""), reply
            assert "disk full" in (reply.remark or ""), reply
            offset = client.invoke(addr, query_offset_request(topic, group, 0), 10)
            assert int((offset.ext_fields or {}).get("offset", "-1")) <= 0, offset

            ballast.unlink()  # an operator frees space

            def found() -> RemotingCommand | None:
                reply = client.invoke(addr, pop_request(topic, group, invisible_ms=60_000), 10)
                return reply if reply.code == ResponseCode.SUCCESS else None

            again = _until(found, 15, "pops did not resume once there was room")
            got = [m.body for m in popped(again, topic, target.broker_name)]
            # The probes stored before the cleanup round judged the disk full come after.
            assert got[:3] == bodies and set(got[3:]) <= {b"probe"}, got
        finally:
            target.stop()

"""What a broker holds of a consumer group's offsets, read with QUERY_CONSUMER_OFFSET.

    wait_committed(target.broker_addr, group, topic, queues=4, total=600)

A stock Java consumer commits every 5 s and, oneway, as it shuts down: on a loaded machine the
last commit can reach the broker after the consumer process has gone. A test or fixture that
reads the offsets a departed consumer left waits for them here first.
"""

from __future__ import annotations

import time

from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient


def committed_offsets(
    client: SyncRemotingClient, broker: str, group: str, topic: str, queues: int
) -> dict[int, int]:
    """The group's committed offset per queue (queues without one left out)."""
    found = {}
    for queue in range(queues):
        header = {"consumerGroup": group, "topic": topic, "queueId": str(queue)}
        request = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header)
        reply = client.invoke(broker, request, 5)
        if reply.code == ResponseCode.SUCCESS:
            found[queue] = int((reply.ext_fields or {}).get("offset", 0))
    return found


def commit_offsets(broker: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """UPDATE_CONSUMER_OFFSET for each queue, as a consumer commits."""
    client = SyncRemotingClient()
    try:
        for queue, offset in offsets.items():
            header = {
                "consumerGroup": group,
                "topic": topic,
                "queueId": str(queue),
                "commitOffset": str(offset),
            }
            request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header)
            reply = client.invoke(broker, request, 5)
            assert reply.code == ResponseCode.SUCCESS, reply
    finally:
        client.close()


def wait_committed(
    broker: str,
    group: str,
    topic: str,
    *,
    queues: int,
    total: int,
    timeout_s: float = 30.0,
    required: bool = True,
) -> dict[int, int]:
    """Until the group's committed offsets on `topic` add up to `total`; then, or after
    `timeout_s`, the offsets. Short of `total` by then: AssertionError naming what there was,
    unless not `required` (a test that only needs no commit still on its way: a consumer gone
    for `timeout_s` has none)."""
    client = SyncRemotingClient()
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            offsets = committed_offsets(client, broker, group, topic, queues)
            if sum(offsets.values()) >= total:
                return offsets
            if time.monotonic() > deadline:
                if not required:
                    return offsets
                raise AssertionError(f"{group} committed {offsets} on {topic}, not {total}")
            time.sleep(0.2)
    finally:
        client.close()


def settle_consumed_group(broker: str, group: str, topic: str, *, queues: int, total: int) -> None:
    """For a group whose consumer read every message of `topic` and left: wait (briefly) for
    its last commits, then commit each queue's end where they fell short. A loaded machine has
    lost every oneway commit of a queue, and RocketMQ then lists no row for it."""
    offsets = wait_committed(broker, group, topic, queues=queues, total=total, timeout_s=10,
                             required=False)  # fmt: skip
    client = SyncRemotingClient()
    try:
        ends = {}
        for queue in range(queues):
            header = {"topic": topic, "queueId": str(queue)}
            request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, header)
            reply = client.invoke(broker, request, 5)
            assert reply.code == ResponseCode.SUCCESS, reply
            ends[queue] = int((reply.ext_fields or {}).get("offset", 0))
    finally:
        client.close()
    short = {q: end for q, end in ends.items() if offsets.get(q, -1) < end}
    if short:
        commit_offsets(broker, group, topic, short)

"""Helpers shared by the interop scenarios: produce with one client, consume with another, check."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from interop.drivers import (
    DriverError,
    DriverProcess,
    DriverRun,
    body_md5,
    consume_messages,
    produce_messages,
    run_driver,
    start_driver,
)
from interop.mqadmin import create_topic
from interop.target import ClusterTarget
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import unique

DEFAULT_PROPS = ["color=blue", "n=7"]


def produce(
    target: ClusterTarget, client: str, topic: str, count: int, *, group: str, **options: Any
) -> list[dict[str, Any]]:
    return produce_messages(
        client, namesrv=target.namesrv_addr, topic=topic, count=count, group=group, **options
    )


def consume(
    target: ClusterTarget, client: str, topic: str, expect: int, *, group: str, **options: Any
) -> DriverRun:
    return consume_messages(
        client, namesrv=target.namesrv_addr, topic=topic, expect=expect, group=group, **options
    )


def start_consumer(
    target: ClusterTarget,
    client: str,
    topic: str,
    expect: int,
    *,
    group: str,
    timeout_s: float = 120,
    **options: Any,
):
    proc = start_driver(
        client,
        "consume",
        namesrv=target.namesrv_addr,
        topic=topic,
        group=group,
        expect=expect,
        timeout_s=timeout_s,
        **options,
    )
    proc.wait_for("ready")
    return proc


def assert_sent_well(
    sent: list[dict[str, Any]], *, count: int, keys_prefix: str = "k-", start: int = 0, **body: Any
) -> None:
    """Every send succeeded and carried the message the protocol says it should."""
    assert [e["index"] for e in sent] == list(range(start, start + count))
    for e in sent:
        assert e["status"] in ("SEND_OK", "ONEWAY"), e
        assert e["keys"] == f"{keys_prefix}{e['index']}", e
        assert e["bodyMd5"] == body_md5(e["index"], **body), e
    # The C++ core reports no queueId on send; compare where the client reports both.
    with_offsets = [(e["queueId"], e["queueOffset"]) for e in sent if "queueId" in e]
    assert len(set(with_offsets)) == len(with_offsets), "two sends got the same queue offset"


def assert_received_all(
    run: DriverRun,
    sent: list[dict[str, Any]],
    *,
    topic: str,
    tags: str | None = None,
    props: list[str] | None = None,
    duplicates_ok: bool = False,
) -> None:
    """What the consumer got is exactly what was sent: same keys, bodies, tags and properties."""
    received = run.received()
    by_key = {e["keys"]: e for e in sent}
    counts = Counter(e["keys"] for e in received)
    missing = set(by_key) - set(counts)
    extra = set(counts) - set(by_key)
    assert not missing, (
        f"{len(missing)} never received, e.g. {sorted(missing)[:5]}\n{run.describe()}"
    )
    assert not extra, f"received messages never sent: {sorted(extra)[:5]}"
    if not duplicates_ok:
        dups = {k: n for k, n in counts.items() if n > 1}
        assert not dups, f"duplicates: {list(dups.items())[:5]}"
    expected_props = dict(p.split("=", 1) for p in props or [])
    for e in received:
        origin = by_key[e["keys"]]
        assert e["topic"] == topic, e
        assert e["bodyMd5"] == origin["bodyMd5"], (e, origin)
        assert e["bodyLen"] == origin["bodyLen"], (e, origin)
        if tags is not None:
            assert e.get("tags") == tags, e
        if props is not None and "properties" in e:
            assert e["properties"] == expected_props, e


def by_index(sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`sent` events in message order (async sends report in completion order)."""
    return sorted(sent, key=lambda e: e["index"])


def wait_with_arrivals(
    proc: DriverProcess, *, poll_s: float = 0.05
) -> tuple[DriverRun, list[float]]:
    """Wait for a background driver, noting when each event line first showed up (time.time()).

    The drivers flush every line at once, so the time noted for an event is no earlier than the
    moment the client handed it over (it is later by up to `poll_s` plus scheduling).
    """
    seen: list[float] = []
    deadline = proc.started + proc.timeout_s + 30
    while proc.proc.poll() is None and time.monotonic() < deadline:
        events = proc.events_so_far()
        now = time.time()
        seen.extend([now] * (len(events) - len(seen)))
        time.sleep(poll_s)
    run = proc.wait()
    now = time.time()
    seen.extend([now] * (len(run.events) - len(seen)))
    return run, seen


# RocketMQ's flow control: a send that waited too long in the broker's queue (or met a busy page
# cache) is refused with SYSTEM_BUSY and never stored. A loaded test machine can trigger it.
BROKER_BUSY = ("[TIMEOUT_CLEAN_QUEUE]", "[PCBUSY_CLEAN_QUEUE]", "[REJECTREQUEST]", "broker busy")
# The C++ client says this when its own route request to the name server fails (under the
# suite's load), even for a topic `new_topic` saw routed. Its async callback gives no text for a
# failed send ("index 0: b''"); under load it failed so at the first send, 0.3 s after start,
# as the sync one did with this text. Both are sent again, as busy refusals are.
ROUTE_TIMED_OUT = ("No route info of this topic",)
CPP_ASYNC_NO_TEXT = ": b''"


def _retried(error: dict[str, Any]) -> bool:
    """Whether a driver's send error is one `produce_all` sends again."""
    message = str(error.get("message"))
    return error.get("error") == "send" and (
        any(m in message for m in BROKER_BUSY + ROUTE_TIMED_OUT)
        or message.endswith(CPP_ASYNC_NO_TEXT)
    )


def produce_all(
    target: ClusterTarget,
    client: str,
    topic: str,
    count: int,
    *,
    group: str,
    timeout_s: float = 120,
    attempts: int = 5,
    **options: Any,
) -> list[dict[str, Any]]:
    """`produce`, except that messages the broker refused as busy are sent again.

    Only that refusal (and the C++ client's failed route request) is forgiven, the way an
    application retries it: the missing indices go out again through a new run of the same
    client with the same options (ranges start where the failed send or batch started, so
    batches keep their boundaries). Any other error fails.
    Returns the `sent` events in index order.
    """
    start = int(options.pop("start", 0))
    sent: dict[int, dict[str, Any]] = {}
    for attempt in range(attempts):
        missing = [i for i in range(start, start + count) if i not in sent]
        if not missing:
            break
        if attempt:
            time.sleep(1.0)
        ranges: list[list[int]] = []
        for i in missing:
            if ranges and ranges[-1][1] == i:
                ranges[-1][1] = i + 1
            else:
                ranges.append([i, i + 1])
        for first, end in ranges:
            run = run_driver(
                client,
                "produce",
                namesrv=target.namesrv_addr,
                topic=topic,
                group=group,
                count=end - first,
                start=first,
                timeout_s=timeout_s,
                **options,
            )
            sent.update((e["index"], e) for e in run.sent())
            if run.returncode == 0 and run.of("done") and not run.junk:
                continue
            busy = run.errors() and all(_retried(e) for e in run.errors())
            if not busy or attempt == attempts - 1:
                raise DriverError(run.describe())
    return [sent[i] for i in sorted(sent)]


QUEUES = 4  # every topic here is created with 4 read and 4 write queues


def new_topic(target: ClusterTarget, prefix: str, queues: int = QUEUES) -> str:
    # A consumer started before its topic exists may wait ~30 s for the route: create it first.
    topic = unique(prefix)
    create_topic(target.namesrv_addr, topic, queues=queues)
    wait_until_routed(target.namesrv_addr, topic)
    return topic


def wait_until_routed(namesrv_addr: str, topic: str, within_s: float = 30) -> None:
    """Until the name server routes `topic`: `updateTopic` returns once the broker has the topic,
    and a loaded broker may register it with the name server a moment later."""
    client = SyncRemotingClient()
    deadline = time.monotonic() + within_s
    try:
        while True:
            request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            if client.invoke(namesrv_addr, request, 5).code == ResponseCode.SUCCESS:
                return
            assert time.monotonic() < deadline, f"{topic} not routed by {namesrv_addr}"
            time.sleep(0.2)
    finally:
        client.close()


@contextmanager
def killing(*procs: DriverProcess) -> Iterator[None]:
    """Kill (by pid) the background drivers still running when the block fails."""
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()

"""Helpers shared by the interop scenarios: produce with one client, consume with another, check."""

from __future__ import annotations

from collections import Counter
from typing import Any

from interop.drivers import DriverRun, body_md5, run_driver, start_driver
from interop.target import ClusterTarget

DEFAULT_PROPS = ["color=blue", "n=7"]


def produce(
    target: ClusterTarget,
    client: str,
    topic: str,
    count: int,
    *,
    group: str,
    timeout_s: float = 120,
    **options: Any,
) -> list[dict[str, Any]]:
    run = run_driver(
        client,
        "produce",
        namesrv=target.namesrv_addr,
        topic=topic,
        group=group,
        count=count,
        timeout_s=timeout_s,
        **options,
    ).check()
    sent = run.sent()
    assert len(sent) == count, run.describe()
    return sent


def consume(
    target: ClusterTarget,
    client: str,
    topic: str,
    expect: int,
    *,
    group: str,
    timeout_s: float = 120,
    **options: Any,
) -> DriverRun:
    return run_driver(
        client,
        "consume",
        namesrv=target.namesrv_addr,
        topic=topic,
        group=group,
        expect=expect,
        timeout_s=timeout_s,
        **options,
    ).check()


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
        if "properties" in e:
            assert e["properties"] == expected_props, e

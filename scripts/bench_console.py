"""Render time of the console's main pages with many topics and groups, on a local Sidewinder.

    python scripts/bench_console.py [--topics 1000] [--groups 500] [--rounds 5]

Starts sidewinder-dev (which starts mqconsole) on leased ports in a temp dir, creates the
topics and the groups (each group with offsets on one topic, so it has a lag), then times each
page (the HTML and its JSON twin) over a few rounds and prints a table: median and worst, ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from interop.dev import dev_cluster
from sidewinder.client.admin import Admin
from sidewinder.client.producer import Message, Producer
from sidewinder.client.pulling import commit_offset
from sidewinder.client.route_cache import MessageQueue

PAGES = [
    "/",
    "/topics",
    "/topics?kind=normal",
    "/groups",
    "/groups?sort=name",
    "/topic?name=T0",
    "/group?name=G0",
]


def wait_http(url: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


async def populate(namesrv: str, broker: str, topics: int, groups: int) -> None:
    async with Admin(namesrv) as admin:
        gate = asyncio.Semaphore(32)

        async def topic(n: int) -> None:
            async with gate:
                await admin.create_topic(f"T{n}", queues=4)

        async def group(n: int) -> None:
            async with gate:
                await admin.update_group(f"G{n}")
                queue = MessageQueue(f"T{n % topics}", "broker-a", 0)
                await commit_offset(admin.remoting, broker, f"G{n}", queue, 0)

        # One at a time: concurrent UPDATE_AND_CREATE_TOPIC trips the broker (a dict changed
        # size during iteration), a bug of its own.
        for n in range(topics):
            await topic(n)
        producer = Producer("bench_console", namesrv)
        for n in range(min(topics, 50)):
            await producer.send(Message(f"T{n}", b"x" * 100))
        await producer.close()
        await asyncio.gather(*(group(n) for n in range(groups)))


def time_page(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as reply:
        reply.read()
    return (time.perf_counter() - started) * 1000


@contextlib.contextmanager
def local_dev(workdir: Path) -> Iterator[tuple[str, str, str]]:
    """sidewinder-dev with its console on leased ports: (name server, broker, console URL)."""
    with dev_cluster(workdir, console=True) as dev:
        assert dev.console_url is not None
        url = dev.console_url.rstrip("/")
        wait_http(url + "/static/console.css")
        yield dev.namesrv_addr, dev.broker_addr, url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, local_dev(Path(tmp)) as (namesrv, broker, base):
        started = time.perf_counter()
        asyncio.run(populate(namesrv, broker, args.topics, args.groups))
        print(
            f"created {args.topics} topics and {args.groups} groups in "
            f"{time.perf_counter() - started:.1f} s"
        )
        print(f"{'page':<24} {'html median':>12} {'html worst':>11} {'json median':>12}")
        for page in PAGES:
            api = "/api/overview" if page == "/" else "/api" + page
            time_page(base + page)  # warm: connections, routes
            html = [time_page(base + page) for _ in range(args.rounds)]
            json_ = [time_page(base + api) for _ in range(args.rounds)]
            print(
                f"{page:<24} {statistics.median(html):>10.0f}ms {max(html):>9.0f}ms "
                f"{statistics.median(json_):>10.0f}ms"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

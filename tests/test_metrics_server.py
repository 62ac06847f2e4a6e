"""common/metrics_server.py: the HTTP side of /metrics, on a real socket."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, Counter

from sidewinder.common.metrics_server import MetricsServer, parse_metrics_label


async def _ask(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    writer.write_eof()  # all the request there is: a cut one is answered at once (by closing)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer


async def test_serves_metrics_and_refuses_the_rest() -> None:
    registry = CollectorRegistry()
    Counter("sidewinder_test_things", "Things", registry=registry).inc(3)
    server = MetricsServer(registry)
    port = await server.start("127.0.0.1", 0)
    try:
        got = await _ask(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        head, _, body = got.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK") and b"text/plain" in head
        assert b"sidewinder_test_things_total 3.0" in body
        open_metrics = await _ask(
            port, b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text\r\n\r\n"
        )
        assert b"application/openmetrics-text" in open_metrics and b"# EOF" in open_metrics
        head_only = await _ask(port, b"HEAD /metrics HTTP/1.1\r\n\r\n")
        assert head_only.startswith(b"HTTP/1.1 200") and head_only.endswith(b"\r\n\r\n")
        assert (await _ask(port, b"GET /other HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
        assert (await _ask(port, b"POST /metrics HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405")
        assert await _ask(port, b"GET /metr") == b""  # a request cut short: closed, no answer
    finally:
        await server.stop()


def test_metrics_label_pairs() -> None:
    assert parse_metrics_label("env:prod, dc:eu1,bad,also:bad:pair,:x") == {
        "env": "prod",
        "dc": "eu1",
    }

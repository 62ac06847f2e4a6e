"""`/metrics` over HTTP for Prometheus, served on the process's own event loop.

    registry = CollectorRegistry(auto_describe=True)
    registry.register(collector)
    server = MetricsServer(registry)
    port = await server.start("127.0.0.1", 5557)   # 0: any free port
    ...
    await server.stop()

Collection runs on the loop, between other work, so collectors read the broker's tables
without locks: they are only ever changed on the loop. A scrape is a few dict walks; it never
waits on I/O. Each connection takes one GET (or HEAD) and is closed after the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from enum import StrEnum

import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

log = structlog.get_logger(__name__)

READ_TIMEOUT_S = 10.0
MAX_HEAD_BYTES = 16 * 1024
DEFAULT_PORT = 5557  # RocketMQ 5's metricsPromExporterPort


class MetricsExporterType(StrEnum):
    """metricsExporterType: RocketMQ 5's values that this project serves (OTLP_GRPC and LOG
    are refused by name when a conf asks for them)."""

    DISABLE = "DISABLE"
    PROM = "PROM"


def parse_metrics_label(text: str) -> dict[str, str]:
    """metricsLabel, "k1:v1,k2:v2": labels every metric gets; malformed pairs are skipped,
    as RocketMQ skips them."""
    labels = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition(":")
        if sep and key and value and ":" not in value:
            labels[key] = value
    return labels


class MetricsServer:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the port (the one asked for, or a free one for 0)."""
        self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics.listening", host=host, port=self.port, path="/metrics")
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            status, content_type, body, is_head = self._answer(head)
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("latin-1")
            )
            if not is_head:
                writer.write(body)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass  # a client that went away or sent no request: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    def _answer(self, head: bytes) -> tuple[str, str, bytes, bool]:
        """(status line, content type, body, whether the body is left out) for a request."""
        if len(head) > MAX_HEAD_BYTES:
            return "431 Request Header Fields Too Large", "text/plain", b"", False
        lines = head.decode("latin-1").split("\r\n")
        method, _, rest = lines[0].partition(" ")
        path = rest.partition(" ")[0].partition("?")[0]
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", "text/plain", b"GET or HEAD only\n", False
        if path not in ("/metrics", "/"):
            return "404 Not Found", "text/plain", b"metrics are at /metrics\n", method == "HEAD"
        accept = ""
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "accept":
                accept = value.strip()
        encode, content_type = choose_encoder(accept)
        return "200 OK", content_type, encode(self.registry), method == "HEAD"

"""A recording TCP proxy for RocketMQ remoting traffic.

It sits between a client and a server and writes every frame, in both directions, to a JSON-lines
file: `{"conn", "proxy", "dir" ("c2s" | "s2c"), "t" (unix seconds), "frame" (base64 of the whole
frame, length prefix included)}`. Bytes that never formed a frame are kept under "raw" (a stream
that is not remoting frames) or "torn" (what was left of a frame when the connection closed: a
peer that hung up mid-write). Frames are split by the 4-byte length prefix only; nothing of the
header is interpreted, so whatever a client sends is captured as sent.

A client learns broker addresses from the name server, so to capture broker traffic the name
server's replies must point at the broker's proxy: `rewrite` maps upstream bytes to replacement
bytes of the same length (e.g. b"127.0.0.1:35227" -> b"127.0.0.1:41000") in server-to-client
frames, which keeps every length prefix valid. Capture lines then hold what the client received.

    python -m interop.proxy --upstream 127.0.0.1:9876 --out cap.jsonl [--listen-port 19876]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import json
import struct
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

_LENGTH = struct.Struct(">i")
# Far above RocketMQ's 16 MiB frame limit: past this the stream is not remoting frames at all.
MAX_RECORDED_FRAME = 64 << 20
_conn_ids = itertools.count(1)


class CaptureWriter:
    """Appends capture records to one file; shared by every proxy of a capture session."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115
        self._lock = threading.Lock()
        self.frames = 0

    def record(self, **fields: object) -> None:
        line = json.dumps(fields, separators=(",", ":"))
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()
            self.frames += 1

    def close(self) -> None:
        with self._lock:
            self._file.close()


class _Direction:
    """Splits one direction of a connection into frames, records and forwards them."""

    def __init__(
        self,
        proxy: RecordingProxy,
        conn: int,
        name: str,
        writer: asyncio.StreamWriter,
        rewrite: Mapping[bytes, bytes],
    ) -> None:
        self.proxy, self.conn, self.name = proxy, conn, name
        self.writer, self.rewrite = writer, rewrite
        self.buffer = bytearray()
        self.passthrough = False

    def feed(self, data: bytes) -> None:
        # Without a rewrite the bytes go on at once, so a torn frame reaches the peer as it
        # would without us; with one, whole frames are held back until rewritten.
        if not self.rewrite:
            self.writer.write(data)
        if self.passthrough:
            self._record(data, framed=False)
            return
        self.buffer += data
        while len(self.buffer) >= 4:
            (length,) = _LENGTH.unpack_from(self.buffer)
            if length < 0 or length > MAX_RECORDED_FRAME:
                # Not a frame stream (or garbage on purpose): keep forwarding, record it raw.
                self.passthrough = True
                self._emit(bytes(self.buffer), framed=False)
                self.buffer.clear()
                return
            if len(self.buffer) < 4 + length:
                return
            frame = bytes(self.buffer[: 4 + length])
            del self.buffer[: 4 + length]
            for old, new in self.rewrite.items():
                frame = frame.replace(old, new)
            self._emit(frame, framed=True)

    def flush_partial(self) -> None:
        """At close: record bytes that never formed a whole frame."""
        if self.buffer:
            self._record(bytes(self.buffer), key="torn")
            if self.rewrite:
                self.writer.write(bytes(self.buffer))
            self.buffer.clear()

    def _emit(self, data: bytes, *, framed: bool) -> None:
        self._record(data, framed=framed)
        if self.rewrite:
            self.writer.write(data)

    def _record(self, data: bytes, *, framed: bool = False, key: str = "") -> None:
        record = {
            "conn": self.conn,
            "proxy": self.proxy.label,
            "dir": self.name,
            "t": round(time.time(), 6),
        }
        key = key or ("frame" if framed else "raw")
        record[key] = base64.b64encode(data).decode("ascii")
        self.proxy.writer.record(**record)


class RecordingProxy:
    """Listens on 127.0.0.1 and relays each connection to `upstream`, recording every frame."""

    def __init__(
        self,
        upstream: str,
        writer: CaptureWriter,
        *,
        label: str = "",
        listen_port: int = 0,
        rewrite_to_client: Mapping[bytes, bytes] | None = None,
    ) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.writer = writer
        self.label = label or upstream
        self.listen_port = listen_port
        self.rewrite = dict(rewrite_to_client or {})
        for old, new in self.rewrite.items():
            if len(old) != len(new):
                raise ValueError(f"rewrite must keep lengths: {old!r} -> {new!r}")
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.listen_port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.listen_port)
        self.listen_port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = next(_conn_ids)
        try:
            server_r, server_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_w.close()
            self._tasks.discard(task)
            return
        c2s = _Direction(self, conn, "c2s", server_w, {})
        s2c = _Direction(self, conn, "s2c", client_w, self.rewrite)
        try:
            await asyncio.gather(self._pump(client_r, c2s), self._pump(server_r, s2c))
        except asyncio.CancelledError:
            pass  # the proxy is closing; the finally below tears the pair down
        finally:
            for w in (client_w, server_w):
                w.close()
            self._tasks.discard(task)

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, direction: _Direction) -> None:
        try:
            while data := await reader.read(1 << 16):
                direction.feed(data)
                await direction.writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            direction.flush_partial()
            # A half-closed side ends the relay both ways, as a TCP peer would see it.
            with contextlib.suppress(OSError, RuntimeError):
                direction.writer.write_eof()


class ProxySession:
    """Proxies running on a private event loop thread, for synchronous tests and scripts.

    with ProxySession(capture_path) as session:
        ns = session.add("127.0.0.1:9876", label="namesrv")
        ...
    """

    def __init__(self, capture_path: Path) -> None:
        self.writer = CaptureWriter(capture_path)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="recording-proxy", daemon=True
        )
        self.proxies: list[RecordingProxy] = []

    def __enter__(self) -> ProxySession:
        self._thread.start()
        return self

    def add(
        self,
        upstream: str,
        *,
        label: str = "",
        listen_port: int = 0,
        rewrite_to_client: Mapping[bytes, bytes] | None = None,
    ) -> RecordingProxy:
        proxy = RecordingProxy(
            upstream,
            self.writer,
            label=label,
            listen_port=listen_port,
            rewrite_to_client=rewrite_to_client,
        )
        asyncio.run_coroutine_threadsafe(proxy.start(), self._loop).result(10)
        self.proxies.append(proxy)
        return proxy

    def __exit__(self, *exc: object) -> None:
        for proxy in self.proxies:
            asyncio.run_coroutine_threadsafe(proxy.close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self.writer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m interop.proxy",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--upstream", required=True, help="HOST:PORT of the real server")
    parser.add_argument("--out", required=True, type=Path, help="capture file (JSON lines)")
    parser.add_argument("--listen-port", type=int, default=0)
    parser.add_argument("--label", default="")
    parser.add_argument(
        "--rewrite",
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="same-length replacement in server-to-client frames",
    )
    args = parser.parse_args(argv)
    rewrite = {
        old.encode(): new.encode() for old, new in (item.split("=", 1) for item in args.rewrite)
    }

    async def serve() -> None:
        writer = CaptureWriter(args.out)
        proxy = RecordingProxy(
            args.upstream,
            writer,
            label=args.label,
            listen_port=args.listen_port,
            rewrite_to_client=rewrite,
        )
        await proxy.start()
        print(f"recording {proxy.addr} -> {args.upstream} into {args.out}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await proxy.close()
            writer.close()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

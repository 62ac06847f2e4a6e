"""Remoting benchmark: codec speed per header type, and server round trips beside a bare echo.

    .venv/bin/python scripts/bench_remoting.py [--seconds 5] [--json PATH]

- codec: encode + decode of a SEND_MESSAGE_V2 request with a 1 KiB body, per header type
  (JSON, ROCKETMQ binary, msgpack), ops/s; decode alone too.
- round trips: 4 connections with 128 requests in flight each, for `--seconds`, against
  (a) our RemotingServer answering every request from a processor and (b) a bare uvloop
  protocol that answers each frame (split by its length prefix only) with a pre-encoded reply
  of the same size. Each server runs in its own process; the load generator is the same raw
  pipelining client for both. The ratio is what to read: the machine is noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import struct
import sys
import time
from pathlib import Path
from typing import Any

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sidewinder.common.log import configure_logging
from sidewinder.protocol.codes import RequestCode, SerializeType
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import SEND_V2_NAMES, SendMessageRequestHeader
from sidewinder.remoting.codec import decode_frame, encode_frame
from sidewinder.remoting.dispatch import ProcessorTable, RequestContext
from sidewinder.remoting.server import RemotingServer

CONNECTIONS = 4
IN_FLIGHT = 128
BODY = b"x" * 1024
REPLY_EXT = {"msgId": "7F00000100002A9F0000000000001000", "queueId": "3", "queueOffset": "42"}


def send_request(serialize_type: SerializeType) -> RemotingCommand:
    header = SendMessageRequestHeader(
        "producer_group_1",
        "TopicTest",
        "TBW102",
        4,
        3,
        0,
        1_700_000_000_000,
        0,
        "KEYS\x01key-1\x02TAGS\x01TagA\x02UNIQ_KEY\x017F0000010F3C18B4AAC20000",
        0,
        False,
        False,
        16,
        "broker-a",
    )
    return RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2,
        header.to_ext(names=SEND_V2_NAMES),
        BODY,
        serialize_type=serialize_type,
    )


def codec_speed(seconds: float) -> dict[str, dict[str, float]]:
    results = {}
    for serialize_type in SerializeType:
        command = send_request(serialize_type)
        frame = encode_frame(command)
        for label, work in (
            ("round", lambda c=command: decode_frame(encode_frame(c))),
            ("decode", lambda f=frame: decode_frame(f)),
        ):
            n, started = 0, time.perf_counter()
            deadline = started + seconds / 6
            while time.perf_counter() < deadline:
                for _ in range(200):
                    work()
                n += 200
            results.setdefault(serialize_type.name, {})[label] = n / (time.perf_counter() - started)
    return results


# -- servers (each in its own process) ---------------------------------------------------------
class Answer:
    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.reply(0, ext_fields=REPLY_EXT)


async def _ours(port_out: Any, stop: Any) -> None:
    table = ProcessorTable()
    table.register(Answer(), RequestCode.SEND_MESSAGE_V2)
    server = RemotingServer(table)
    port_out.put(await server.start("127.0.0.1", 0))
    while not stop.is_set():
        await asyncio.sleep(0.1)
    await server.stop()


class BareEcho(asyncio.Protocol):
    """Answers each whole frame with a fixed reply: the floor any server's cost sits on."""

    reply = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buffer = bytearray()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        out = []
        start = 0
        while len(self.buffer) - start >= 4:
            (length,) = struct.unpack_from(">i", self.buffer, start)
            if len(self.buffer) - start < 4 + length:
                break
            start += 4 + length
            out.append(self.reply)
        del self.buffer[:start]
        if out:
            self.transport.writelines(out)  # type: ignore[attr-defined]


async def _bare(port_out: Any, stop: Any) -> None:
    request = send_request(SerializeType.JSON)
    request.opaque = 1
    BareEcho.reply = encode_frame(request.reply(0, ext_fields=REPLY_EXT))
    loop = asyncio.get_running_loop()
    server = await loop.create_server(BareEcho, "127.0.0.1", 0)
    port_out.put(server.sockets[0].getsockname()[1])
    while not stop.is_set():
        await asyncio.sleep(0.1)
    server.close()


def _serve(kind: str, port_out: Any, stop: Any) -> None:
    configure_logging("WARNING")
    uvloop.run(_ours(port_out, stop) if kind == "ours" else _bare(port_out, stop))


# -- load -----------------------------------------------------------------------------------
class Pipeline(asyncio.Protocol):
    """Keeps IN_FLIGHT requests outstanding; counts whole frames coming back."""

    def __init__(self, frames: list[bytes], done: asyncio.Future[None], deadline: float) -> None:
        self.frames, self.done, self.deadline = frames, done, deadline
        self.decoder_buffer = bytearray()
        self.replies = 0
        self.sent = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self._send(IN_FLIGHT)

    def _send(self, count: int) -> None:
        if time.perf_counter() >= self.deadline:
            if self.sent == self.replies and not self.done.done():
                self.done.set_result(None)
            return
        batch = [self.frames[(self.sent + i) % len(self.frames)] for i in range(count)]
        self.sent += count
        self.transport.writelines(batch)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.decoder_buffer += data
        start, got = 0, 0
        while len(self.decoder_buffer) - start >= 4:
            (length,) = struct.unpack_from(">i", self.decoder_buffer, start)
            if len(self.decoder_buffer) - start < 4 + length:
                break
            start += 4 + length
            got += 1
        del self.decoder_buffer[:start]
        self.replies += got
        if got:
            self._send(got)


async def _load(port: int, seconds: float) -> float:
    loop = asyncio.get_running_loop()
    frames = []
    for n in range(IN_FLIGHT):
        request = send_request(SerializeType.JSON)
        request.opaque = n + 1
        frames.append(encode_frame(request))
    started = time.perf_counter()
    deadline = started + seconds
    pipes = []
    for _ in range(CONNECTIONS):
        done: asyncio.Future[None] = loop.create_future()
        _, pipe = await loop.create_connection(
            lambda d=done: Pipeline(frames, d, deadline), "127.0.0.1", port
        )
        pipes.append(pipe)
    await asyncio.wait_for(asyncio.gather(*(p.done for p in pipes)), seconds + 30)
    elapsed = time.perf_counter() - started
    for pipe in pipes:
        pipe.transport.close()
    return sum(p.replies for p in pipes) / elapsed


def round_trips(kind: str, seconds: float) -> float:
    context = multiprocessing.get_context("spawn")
    port_out, stop = context.Queue(), context.Event()
    server = context.Process(target=_serve, args=(kind, port_out, stop), daemon=True)
    server.start()
    try:
        port = port_out.get(timeout=30)
        return uvloop.run(_load(port, seconds))
    finally:
        stop.set()
        server.join(10)
        if server.is_alive():
            server.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    configure_logging("WARNING")
    codec = codec_speed(args.seconds)
    bare = round_trips("bare", args.seconds)
    ours = round_trips("ours", args.seconds)
    json_decode = codec["JSON"]["decode"]
    print(f"remoting benchmark: SEND_MESSAGE_V2 with a 1 KiB body, {args.seconds:g} s per run")
    print("| measure | ops/s | beside | ratio |\n|---|---|---|---|")
    for name, figures in codec.items():
        print(f"| {name} encode+decode | {figures['round']:,.0f} | | |")
    for name, figures in codec.items():
        print(
            f"| {name} decode | {figures['decode']:,.0f} | JSON decode "
            f"| {figures['decode'] / json_decode:.2f}x |"
        )
    print(
        f"| round trips, {CONNECTIONS} conns x {IN_FLIGHT} in flight | {ours:,.0f} "
        f"| bare uvloop echo {bare:,.0f} | {ours / bare:.1%} |"
    )
    if args.json:
        args.json.write_text(json.dumps({"codec": codec, "bare": bare, "ours": ours}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

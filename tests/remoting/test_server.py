"""The remoting server and client over real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from sidewinder.protocol.codes import ResponseCode, SerializeType
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import TopicQueueRequestHeader
from sidewinder.remoting.client import RemotingClient, SyncRemotingClient
from sidewinder.remoting.codec import FrameDecoder, encode_command, encode_frame
from sidewinder.remoting.config import ServerConfig
from sidewinder.remoting.connection import Connection, RemotingConnectError, RemotingTimeoutError
from sidewinder.remoting.dispatch import Limits, ProcessorTable, RequestContext
from sidewinder.remoting.server import RemotingServer

ECHO, SLOW, RAISE, CALLBACK, ONEWAY_SINK, HEADER = 1001, 1002, 1003, 1004, 1005, 1006
SLOW_UNLIMITED = 1007


class Processor:
    def __init__(self, handle: Callable[[RequestContext, RemotingCommand], Awaitable[Any]]) -> None:
        self.handle = handle
        self.calls = 0

    async def process(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        self.calls += 1
        return await self.handle(ctx, request)


async def echo(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    return request.reply(0, ext_fields=request.ext_fields, body=request.body)


async def slow(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    await asyncio.sleep(float((request.ext_fields or {}).get("sleep", "0.5")))
    return request.reply(0)


async def boom(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    raise RuntimeError("the disk said no")


async def call_back(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    # Ask the client something, as a broker asks a producer for a transaction's state.
    answer = await ctx.invoke(RemotingCommand.request(2001, {"q": "state?"}), 3)
    return request.reply(0, ext_fields={"client_said": (answer.ext_fields or {})["a"]})


async def header(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    parsed = TopicQueueRequestHeader.from_ext(request.ext_fields)
    return request.reply(0, ext_fields={"topic": parsed.topic})


class Events:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_connect(self, connection: Connection) -> None:
        self.seen.append("connect")

    def on_close(self, connection: Connection) -> None:
        self.seen.append("close")

    def on_idle(self, connection: Connection) -> None:
        self.seen.append("idle")


class Harness:
    def __init__(self, server: RemotingServer, sink: Processor, events: Events) -> None:
        self.server, self.sink, self.events = server, sink, events
        self.address = f"127.0.0.1:{server.port}"


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    table = ProcessorTable()
    table.register(Processor(echo), ECHO)
    table.register(Processor(slow), SLOW, limits=Limits(concurrency=1, capacity=3, budget_ms=100))
    table.register(Processor(boom), RAISE)
    table.register(Processor(call_back), CALLBACK)
    table.register(Processor(header), HEADER)
    table.register(Processor(slow), SLOW_UNLIMITED)
    sink = Processor(echo)
    table.register(sink, ONEWAY_SINK)
    events = Events()
    config = ServerConfig(server_channel_max_idle_time_seconds=2, frame_max_length=1 << 16)
    server = RemotingServer(table, config, listener=events)
    await server.start("127.0.0.1", 0)
    yield Harness(server, sink, events)
    await server.stop()


def request(code: int, **ext: str) -> RemotingCommand:
    return RemotingCommand.request(code, dict(ext) if ext else None)


async def test_unknown_code_and_raising_processor_leave_the_connection_usable(
    harness: Harness,
) -> None:
    client = RemotingClient()
    unknown = await client.invoke(harness.address, request(4242), 3)
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "4242" in (unknown.remark or "")
    failed = await client.invoke(harness.address, request(RAISE), 3)
    assert failed.code == ResponseCode.SYSTEM_ERROR
    assert "the disk said no" in (failed.remark or "")
    missing = await client.invoke(harness.address, request(HEADER, queueId="1"), 3)
    assert missing.code == ResponseCode.SYSTEM_ERROR
    assert missing.remark == "the custom field <topic> is null"
    ok = await client.invoke(harness.address, request(ECHO, k="v"), 3)
    assert ok.code == ResponseCode.SUCCESS and ok.ext_fields == {"k": "v"}
    await client.close()


def test_the_table_lists_the_codes_it_registers() -> None:
    table = ProcessorTable()
    table.register(Processor(echo), ECHO, SLOW)
    table.register(Processor(boom), RAISE)
    assert table.codes() == sorted([ECHO, SLOW, RAISE])


@pytest.mark.parametrize("serialize_type", list(SerializeType))
async def test_replies_keep_the_requests_header_type(
    harness: Harness, serialize_type: SerializeType
) -> None:
    client = RemotingClient()
    sent = RemotingCommand.request(ECHO, {"x": "1"}, b"body", serialize_type=serialize_type)
    got = await client.invoke(harness.address, sent, 3)
    assert got.serialize_type == serialize_type
    assert got.opaque == sent.opaque and got.body_bytes == b"body"
    await client.close()


def raw_exchange(port: int, data: bytes) -> bytes:
    """Send bytes on a plain socket; what comes back before the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


async def test_garbage_and_oversized_frames_close_only_their_connection(harness: Harness) -> None:
    client = RemotingClient()
    assert (await client.invoke(harness.address, request(ECHO), 3)).code == 0
    loop = asyncio.get_running_loop()
    garbage = await loop.run_in_executor(
        None, raw_exchange, harness.server.port, struct.pack(">ii", 12, 0x09000004) + b"junkjunk"
    )
    assert garbage == b""  # closed without a reply
    oversized = struct.pack(">ii", 1 << 20, 4) + b"{}"
    assert await loop.run_in_executor(None, raw_exchange, harness.server.port, oversized) == b""
    # The first connection never noticed.
    assert (await client.invoke(harness.address, request(ECHO, still="here"), 3)).code == 0
    await client.close()


async def test_an_overloaded_processor_answers_system_busy_fast(harness: Harness) -> None:
    client = RemotingClient()
    calls = [client.invoke(harness.address, request(SLOW, sleep="0.4"), 5) for _ in range(6)]
    replies = await asyncio.gather(*calls)
    codes = [r.code for r in replies]
    remarks = " ".join(r.remark or "" for r in replies)
    assert codes.count(ResponseCode.SUCCESS) == 1  # concurrency 1; the rest waited too long
    assert codes.count(ResponseCode.SYSTEM_BUSY) == 5
    assert "[TIMEOUT_CLEAN_QUEUE]" in remarks and "[OVERLOAD]" in remarks  # capacity 3
    await client.close()


async def test_a_slow_processor_never_delays_another(harness: Harness) -> None:
    client = RemotingClient()
    slow_call = asyncio.ensure_future(client.invoke(harness.address, request(SLOW, sleep="1"), 5))
    await asyncio.sleep(0.05)
    started = asyncio.get_running_loop().time()
    assert (await client.invoke(harness.address, request(ECHO), 3)).code == 0
    assert asyncio.get_running_loop().time() - started < 0.5
    assert (await slow_call).code == 0
    await client.close()


async def test_oneway_requests_get_no_response(harness: Harness) -> None:
    client = RemotingClient()
    connection = await client.connect(harness.address)
    frames: list[RemotingCommand] = []
    original = connection._answered

    def spy(command: RemotingCommand) -> None:
        frames.append(command)
        original(command)

    connection._answered = spy  # type: ignore[method-assign]
    await client.invoke_oneway(harness.address, request(ONEWAY_SINK, n="1"))
    reply = await client.invoke(harness.address, request(ECHO), 3)
    for _ in range(50):
        if harness.sink.calls:
            break
        await asyncio.sleep(0.01)
    assert harness.sink.calls == 1
    assert [f.opaque for f in frames] == [reply.opaque]  # only the two-way call was answered
    await client.close()


async def test_the_server_can_call_its_client(harness: Harness) -> None:
    async def answer(ctx: RequestContext, asked: RemotingCommand) -> RemotingCommand:
        return asked.reply(0, ext_fields={"a": "COMMIT"})

    table = ProcessorTable()
    table.register(Processor(answer), 2001)
    client = RemotingClient(table)
    reply = await client.invoke(harness.address, request(CALLBACK), 3)
    assert reply.code == 0 and reply.ext_fields == {"client_said": "COMMIT"}
    await client.close()


async def test_timeouts_and_closed_connections_fail_calls_promptly(harness: Harness) -> None:
    client = RemotingClient()
    with pytest.raises(RemotingTimeoutError, match="within 100 ms"):
        await client.invoke(harness.address, request(SLOW_UNLIMITED, sleep="0.5"), 0.1)
    connection = await client.connect(harness.address)
    assert not connection.pending
    pending = asyncio.ensure_future(connection.invoke(request(SLOW_UNLIMITED, sleep="5"), 10))
    await asyncio.sleep(0.02)
    for server_side in list(harness.server.connections):
        server_side.close()
    started = asyncio.get_running_loop().time()
    with pytest.raises(RemotingConnectError):
        await pending
    assert asyncio.get_running_loop().time() - started < 1
    # A fresh connection is made on the next call.
    assert (await client.invoke(harness.address, request(ECHO), 3)).code == 0
    with pytest.raises(RemotingConnectError, match="cannot connect"):
        await client.invoke("127.0.0.1:1", request(ECHO), 3)
    await client.close()


async def test_idle_connections_close_and_the_listener_hears_of_it(harness: Harness) -> None:
    client = RemotingClient()
    connection = await client.connect(harness.address)
    await asyncio.wait_for(connection.closed, 6)
    await asyncio.sleep(0.05)
    assert harness.events.seen == ["connect", "idle", "close"]
    await client.close()


async def test_many_responses_in_one_turn_arrive_whole(harness: Harness) -> None:
    client = RemotingClient()
    replies = await asyncio.gather(
        *(client.invoke(harness.address, request(ECHO, n=str(n)), 5) for n in range(500))
    )
    assert [r.ext_fields for r in replies] == [{"n": str(n)} for n in range(500)]
    await client.close()


def test_the_sync_facade(harness_port: int) -> None:
    client = SyncRemotingClient()
    try:
        reply = client.invoke(f"127.0.0.1:{harness_port}", request(ECHO, a="b"), 3)
        assert reply.code == 0 and reply.ext_fields == {"a": "b"}
    finally:
        client.close()


@pytest.fixture
def harness_port() -> Any:
    """A server on its own loop in a thread, for the synchronous facade's test."""
    import threading

    loop = asyncio.new_event_loop()
    table = ProcessorTable()
    table.register(Processor(echo), ECHO)
    server = RemotingServer(table)
    port = loop.run_until_complete(server.start("127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield port
    asyncio.run_coroutine_threadsafe(server.stop(), loop).result(5)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def test_frames_split_anywhere_by_a_raw_peer_still_decode(harness_port: int) -> None:
    frame = encode_frame(RemotingCommand.request(ECHO, {"k": "v"}, b"x" * 100))
    with socket.create_connection(("127.0.0.1", harness_port), timeout=5) as sock:
        for byte in frame:
            sock.sendall(bytes([byte]))
        decoder = FrameDecoder()
        got: list[RemotingCommand] = []
        while not got:
            decoder.feed(sock.recv(65536))
            got = list(decoder.commands())
    assert got[0].body_bytes == b"x" * 100 and got[0].is_response


async def test_callbacks_get_the_response_or_the_error(harness: Harness) -> None:
    client = RemotingClient()
    outcomes: list[tuple[int | None, str | None]] = []

    def record(response: RemotingCommand | None, error: BaseException | None) -> None:
        outcomes.append(
            (response.code if response else None, type(error).__name__ if error else None)
        )

    await client.invoke_with_callback(harness.address, request(ECHO), 3, record)
    await client.invoke_with_callback(
        harness.address, request(SLOW_UNLIMITED, sleep="1"), 0.05, record
    )
    assert outcomes == [(0, None), (None, "RemotingTimeoutError")]
    await client.close()


async def test_a_cancel_that_comes_with_the_response_is_not_lost() -> None:
    """The response and the caller's cancellation in one loop turn: the caller still ends
    cancelled (asyncio.wait_for on 3.11 returned the response and the cancellation was lost,
    which kept a producer's close() waiting on its heartbeat task for ever)."""
    ours, theirs = socket.socketpair()
    loop = asyncio.get_running_loop()
    _, connection = await loop.create_connection(lambda: Connection(None), sock=ours)
    try:
        sent = request(ECHO)
        caller = asyncio.ensure_future(connection.invoke(sent, 5.0))
        await asyncio.sleep(0.01)  # the request is out and the caller waits
        connection.data_received(b"".join(encode_command(sent.reply(0))))
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
    finally:
        connection.close()
        theirs.close()

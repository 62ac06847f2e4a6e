"""A lean load generator: raw uvloop protocols sending pre-encoded frames, so that what a run
measures is the broker, not the client.

    meter = Meter(lambda: broker_cpu_s)               # read when the load starts and ends
    sends = send_templates("BenchLean1K", "broker-a", queues=8, body=b"x" * 1024)
    load = uvloop.run(produce(("127.0.0.1", 10911), sends, 4, 64, seconds=5, meter=meter))
    pulls = pull_templates("BenchLean1K", queues=8)
    load = uvloop.run(pull(addr, pulls, offsets, targets, seconds=30, meter=meter))
    load.messages, load.per_second, percentile_ms(sorted(load.latencies_ns), 99), meter.own_cores

RocketMQ's remoting protocol (Sidewinder and RocketMQ alike):
- SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE frames are encoded once per queue, with the codec and
  the header classes, as RocketMQ 4.9.8's Java producer sends them (JSON header, one-letter V2
  field names; properties UNIQ_KEY, WAIT=true and TAGS). A send is one fixed-width number, the
  opaque (10 decimal digits, also the tail of each message's UNIQ_KEY), joined with its queue's
  template pieces. Replies are matched by opaque, read straight from the reply's JSON
  header in the receive buffer (a BufferedProtocol: no copy); nothing is decoded into objects.
- Each connection keeps `window` requests in flight and answers a received chunk of replies
  with one write of as many new frames.
- PULL_MESSAGE: batch 32, one request in flight per queue, from given offsets up to given
  targets (what was produced); a reply's records are counted by walking their size fields.
- POP_MESSAGE + ACK_MESSAGE (RocketMQ 5): `window` consumers per connection, each popping up to
  32 messages of any queue (queueId -1, invisible for 60 s) and acking every one it got with its
  own ACK_MESSAGE, as RocketMQ 5's gRPC clients do (all written at once), then popping again
  when its acks are answered. Pop and ack headers are templates split around their slots (born
  time, handle, offset, opaque); a pop reply's header and records are decoded with the
  protocol package (PopMessageResponseHeader, message_records) and each handle built as the
  client builds it (ExtraInfo). Only the acks' round trips are the latencies.

    pops = pop_templates("BenchLean1K", "bench_pop", "broker-a")
    load = uvloop.run(pop(addr, pops, 100_000, 4, 2, seconds=5, meter=meter))

The same shapes against Redis Streams are in loadgen_redis.py.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, cast

from sidewinder.protocol.codes import CURRENT_VERSION, LanguageCode, RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    SEND_V2_NAMES,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from sidewinder.protocol.message import MessageConst, encode_properties
from sidewinder.protocol.pop import (
    POLLING_FULL,
    POLLING_TIMEOUT,
    PROPERTY_POP_CK,
    AckMessageRequestHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    PopRequestCode,
    parse_start_offsets,
    retry_flag,
)
from sidewinder.protocol.record import message_records
from sidewinder.remoting.codec import decode_json_header, encode_frame, encode_json_header

OPAQUE_BASE = 1_000_000_000  # 10 digits from here up to 2**31 - 1: patched in place
UNIQ_COUNTER_DIGITS = 12  # the UNIQ_KEY's last 12 of 32 hex digits: see SendTemplate
PULL_BATCH = 32
PULL_RETRY_S = 0.001  # a queue whose ConsumeQueue lags what was acknowledged asks again
GROUP = "bench_lean_producer"
CONSUMER_GROUP = "bench_lean_consumer"
POP_BATCH = 32  # maxMsgNums of a pop (RocketMQ 5's ceiling)
POP_INVISIBLE_MS = 60_000
POP_RETRY_S = 0.001  # a pop that found nothing while messages are left asks again
POP_DRAIN_S = 30.0
TAGS = "TagA"
CONNECT_TIMEOUT_S = 10.0
RECEIVE_BUFFER = 1 << 20  # grows when a frame needs more

_PREFIX = struct.Struct(">ii")
_I32 = struct.Struct(">i")
_BATCH_HEAD = struct.Struct(">iiiii")  # totalSize, magic, bodyCRC, flag, bodyLen
_NEXT_OFFSET = re.compile(rb'"nextBeginOffset":"?(\d+)')
_PULL_EMPTY = (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY)
_POP_EMPTY = (POLLING_TIMEOUT, POLLING_FULL)
_OFFSET_SENTINEL = 987_654_321_987_654  # a queue offset no run reaches, split out of the header


class LoadError(RuntimeError):
    """The broker answered something the generator cannot read, or closed the connection."""


# -- meters ---------------------------------------------------------------------------------------
@dataclass
class Meter:
    """Reads the broker's CPU-seconds and this process's own CPU when a load starts and ends."""

    broker_cpu_s: Callable[[], float]
    wall_s: float = 0.0
    broker_s: float = 0.0
    own_s: float = 0.0
    _marks: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def start(self) -> None:
        broker = self.broker_cpu_s()  # psutil first: its cost stays outside our own CPU
        self._marks = (time.perf_counter(), time.process_time(), broker)

    def stop(self) -> None:
        wall, own = time.perf_counter(), time.process_time()
        broker = self.broker_cpu_s()
        self.wall_s = wall - self._marks[0]
        self.own_s = own - self._marks[1]
        self.broker_s = broker - self._marks[2]

    @property
    def own_cores(self) -> float:
        return self.own_s / self.wall_s if self.wall_s > 0 else 0.0


@dataclass
class Load:
    """What one load slice did: counts, per-request latencies, and per-queue successes."""

    messages: int = 0  # acknowledged (or pulled) messages
    received: int = 0  # messages pops handed out (each then acked)
    requests: int = 0  # requests sent
    answered: int = 0  # replies received
    failed: dict[int, int] = field(default_factory=dict)  # response code -> requests
    per_queue: list[int] = field(default_factory=list)  # acknowledged (pulled) per queue
    latencies_ns: list[int] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def per_second(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def unanswered(self) -> int:
        return self.requests - self.answered


def percentile_ms(ordered_ns: Sequence[int], p: float) -> float | None:
    """The p-th percentile (nearest rank) of sorted nanoseconds, in ms."""
    if not ordered_ns:
        return None
    return ordered_ns[min(len(ordered_ns) - 1, int(p / 100 * len(ordered_ns)))] / 1e6


# -- pre-encoded RocketMQ frames ------------------------------------------------------------------
@dataclass(frozen=True)
class SendTemplate:
    """One whole request frame. A send patches the opaque (10 decimal digits) into it, and
    into the tail of each message's UNIQ_KEY: 20 hex digits fixed per template set (random in
    part), the connection and the message's index in the frame (a hex digit each, filled in by
    `for_connection`), then the opaque, so that keys never repeat and a send formats one number
    and joins the pieces around it.
    """

    frame: bytes
    opaque_at: int
    uniq_at: tuple[int, ...]  # where each message's UNIQ_KEY counter digits start

    @property
    def messages(self) -> int:
        return len(self.uniq_at)

    def for_connection(self, connection: int) -> ConnectionTemplate:
        if not 0 <= connection < 16 or self.messages > 16:
            raise ValueError("at most 16 connections and 16 messages per send")
        frame = bytearray(self.frame)
        for index, at in enumerate(self.uniq_at):
            frame[at : at + 2] = b"%X%X" % (connection, index)
        slots = sorted([self.opaque_at, *(at + 2 for at in self.uniq_at)])
        edges = [0, *(x for at in slots for x in (at, at + 10)), len(frame)]
        return ConnectionTemplate(
            tuple(bytes(frame[a:b]) for a, b in zip(edges[::2], edges[1::2], strict=True)),
            self.messages,
        )


@dataclass(frozen=True)
class ConnectionTemplate:
    """A SendTemplate with one connection's digits in: the frame in pieces around the slots
    the opaque goes into."""

    pieces: tuple[bytes, ...]
    messages: int

    def render(self, opaque: bytes) -> bytes:
        """The frame with `opaque` (10 digits) in every slot: one join."""
        return opaque.join(self.pieces)


def _uniq_prefix() -> str:
    """The fixed 20 of a UNIQ_KEY's 32 hex digits: address, pid and a random part (random per
    template set, so keys never repeat across slices)."""
    try:
        host = socket.inet_aton(socket.gethostbyname(socket.gethostname()))
    except OSError:
        host = b"\x7f\x00\x00\x01"
    return (host + struct.pack(">H", os.getpid() & 0xFFFF) + os.urandom(4)).hex().upper()


def _command(code: int, ext: dict[str, str], body: bytes | None) -> RemotingCommand:
    # As the Java client's requests: language JAVA, its version, opaque to be patched.
    return RemotingCommand(
        code, LanguageCode.JAVA, CURRENT_VERSION, OPAQUE_BASE, 0, None, ext, body
    )


def _batch_entry(body: bytes, properties: bytes) -> bytes:
    """One message of a SEND_BATCH_MESSAGE body (MessageDecoder.encodeMessage)."""
    size = _BATCH_HEAD.size + len(body) + 2 + len(properties)
    head = _BATCH_HEAD.pack(size, 0, 0, 0, len(body))
    return head + body + struct.pack(">h", len(properties)) + properties


def send_templates(
    topic: str, broker_name: str, *, queues: int, body: bytes, batch: int = 1
) -> list[SendTemplate]:
    """One template per queue: SEND_MESSAGE_V2 (batch 1) or SEND_BATCH_MESSAGE of `batch`."""
    prefix = _uniq_prefix()
    props = encode_properties(
        {
            MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: prefix + "0" * UNIQ_COUNTER_DIGITS,
            MessageConst.WAIT_STORE_MSG_OK: "true",
            MessageConst.TAGS: TAGS,
        },
        trailing=False,
    )
    if batch > 1:  # the Java producer's batch: WAIT in the header, each message's own below
        code, header_props = RequestCode.SEND_BATCH_MESSAGE, "WAIT\x01true"
        data = _batch_entry(body, props) * batch
    else:
        code, header_props, data = RequestCode.SEND_MESSAGE_V2, props.decode(), body
    born_ms = int(time.time() * 1000)
    templates = []
    for queue in range(queues):
        header = SendMessageRequestHeader(
            producer_group=GROUP,
            topic=topic,
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=queue,
            sys_flag=0,
            born_timestamp=born_ms,
            flag=0,
            properties=header_props,
            reconsume_times=0,
            unit_mode=False,
            batch=batch > 1,
            broker_name=broker_name,
        )
        frame = encode_frame(_command(code, header.to_ext(names=SEND_V2_NAMES), data))
        marker = b'"opaque":%d' % OPAQUE_BASE
        if frame.count(b'"opaque":') != 1 or frame.count(marker) != 1:
            raise LoadError("the send template's opaque is not where it should be")
        needle = prefix.encode()
        uniq_at = tuple(m.start() + len(needle) for m in re.finditer(re.escape(needle), frame))
        if len(uniq_at) != batch:
            raise LoadError(f"found {len(uniq_at)} UNIQ_KEYs in a send of {batch}")
        templates.append(SendTemplate(frame, frame.index(marker) + len(b'"opaque":'), uniq_at))
    return templates


@dataclass(frozen=True)
class PullTemplate:
    """A PULL_MESSAGE JSON header split around its queue offset and opaque."""

    head: bytes
    middle: bytes
    tail: bytes

    def render(self, offset: int, opaque: int) -> bytes:
        header = b"%s%d%s%d%s" % (self.head, offset, self.middle, opaque, self.tail)
        return _PREFIX.pack(4 + len(header), len(header)) + header


def pull_templates(topic: str, *, queues: int) -> list[PullTemplate]:
    """PULL_MESSAGE as a lite pull consumer sends it: subscription "*" in the request (no
    heartbeat needed), no suspension, no offset commit."""
    templates = []
    for queue in range(queues):
        header = PullMessageRequestHeader(
            consumer_group=CONSUMER_GROUP,
            topic=topic,
            queue_id=queue,
            queue_offset=_OFFSET_SENTINEL,
            max_msg_nums=PULL_BATCH,
            sys_flag=0x4,  # FLAG_SUBSCRIPTION
            commit_offset=0,
            suspend_timeout_millis=0,
            sub_version=0,
            subscription="*",
            expression_type="TAG",
        )
        encoded = encode_json_header(_command(RequestCode.PULL_MESSAGE, header.to_ext(), None))
        head, rest = encoded.split(b"%d" % _OFFSET_SENTINEL)
        middle, tail = rest.split(b"%d" % OPAQUE_BASE)
        templates.append(PullTemplate(head, middle, tail))
    return templates


@dataclass(frozen=True)
class HeaderTemplate:
    """A body-less request frame (a JSON header only) in pieces around its slots: `render`
    takes one value per slot, in the order the template was built with."""

    pieces: tuple[bytes, ...]
    order: tuple[int, ...]  # which value goes into each gap, in the frame's order

    def render(self, *values: bytes) -> bytes:
        pieces = self.pieces
        parts = [pieces[0]]
        for gap, index in enumerate(self.order, 1):
            parts += (values[index], pieces[gap])
        header = b"".join(parts)
        return _PREFIX.pack(4 + len(header), len(header)) + header


def header_template(code: int, ext: dict[str, str], slots: Sequence[str]) -> HeaderTemplate:
    """The request `code` with `ext`, its fields named in `slots` left open ("opaque": the
    command's opaque), encoded once by the codec."""
    marks = {name: f"@slot{n}@" for n, name in enumerate(slots) if name != "opaque"}
    missing = set(marks) - set(ext)
    if missing:
        raise LoadError(f"slots {sorted(missing)} are not fields of the header")
    encoded = encode_json_header(_command(code, ext | marks, None))
    found = []  # (where, length, slot)
    for n, name in enumerate(slots):
        if name == "opaque":
            needle = b'"opaque":%d' % OPAQUE_BASE
            skip, length = len(b'"opaque":'), len(b"%d" % OPAQUE_BASE)
        else:
            needle, skip, length = marks[name].encode(), 0, len(marks[name])
        if encoded.count(needle) != 1:
            raise LoadError(f"slot {name!r} is not in the header exactly once")
        found.append((encoded.index(needle) + skip, length, n))
    found.sort()
    edges = [0, *(x for at, length, _ in found for x in (at, at + length)), len(encoded)]
    pieces = tuple(encoded[a:b] for a, b in zip(edges[::2], edges[1::2], strict=True))
    return HeaderTemplate(pieces, tuple(n for _, _, n in found))


@dataclass(frozen=True)
class PopTemplates:
    """What a POP + ACK load sends: the pop (slots bornTime, opaque) and the ack (slots topic,
    queueId, extraInfo, offset, opaque) of one group on one topic."""

    topic: str
    group: str
    broker_name: str
    pop: HeaderTemplate
    ack: HeaderTemplate


def pop_templates(topic: str, group: str, broker_name: str) -> PopTemplates:
    """POP_MESSAGE as RocketMQ 5's client sends it (any queue, 32, invisible 60 s, no long
    polling, tag "*", the group's first pop from the queue's start) and its ACK_MESSAGE."""
    pop_header = PopMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=-1,
        max_msg_nums=POP_BATCH,
        invisible_time=POP_INVISIBLE_MS,
        poll_time=0,
        born_time=0,  # a slot: the broker answers 210 to a pop born too long ago
        init_mode=0,  # ConsumeInitMode.MIN
        exp_type="TAG",
        exp="*",
        broker_name=broker_name,
    )
    ack_header = AckMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=0,
        extra_info="",
        offset=0,
        broker_name=broker_name,
    )
    return PopTemplates(
        topic,
        group,
        broker_name,
        header_template(PopRequestCode.POP_MESSAGE, pop_header.to_ext(), ("bornTime", "opaque")),
        header_template(
            PopRequestCode.ACK_MESSAGE,
            ack_header.to_ext(),
            ("topic", "queueId", "extraInfo", "offset", "opaque"),
        ),
    )


def popped_handles(
    templates: PopTemplates, header: bytes | bytearray | memoryview, body: bytes
) -> list[tuple[str, int, str, int]]:
    """(topic to ack on, queueId, handle, queue offset) of each message of a pop reply, the
    handle built as RocketMQ 5's client builds it (MQClientAPIImpl.processPopResponse): its
    POP_CK property, or the reply's popTime, invisibleTime and reviveQid with the queue's
    check point start offset from startOffsetInfo."""
    reply = PopMessageResponseHeader.from_ext(decode_json_header(header).ext_fields)
    starts = parse_start_offsets(reply.start_offset_info)
    topic, group, broker = templates.topic, templates.group, templates.broker_name
    out = []
    for record in message_records(body):
        handle = record.properties().get(PROPERTY_POP_CK) if b"POP_CK" in body else None
        if handle is None:
            retry = retry_flag(record.topic)
            key = (retry, record.queue_id)
            if key not in starts:
                raise LoadError(f"a popped message of queue {key} not in startOffsetInfo")
            extra = ExtraInfo(
                starts[key],
                reply.pop_time,
                reply.invisible_time,
                reply.revive_qid,
                retry,
                broker,
                record.queue_id,
                record.queue_offset,
            )
            handle = extra.encode()
        else:
            extra = ExtraInfo.decode(handle)
        if extra.queue_offset is None:
            raise LoadError(f"handle {handle!r} names no message offset")
        out.append((extra.real_topic(topic, group), extra.queue_id, handle, extra.queue_offset))
    return out


# -- connections ----------------------------------------------------------------------------------
class LoadProtocol(asyncio.BaseProtocol):
    """A load connection: `done` resolves once nothing is in flight after the deadline."""

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.done = done
        self.transport: asyncio.Transport | None = None
        self.inflight = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.done.done():
            return
        if isinstance(exc, KeyboardInterrupt):  # Ctrl-C or the bench's SIGTERM: unwind as such
            self.done.set_exception(exc)
        else:
            self.done.set_exception(LoadError(f"the server closed the connection ({exc})"))

    def fail(self, why: str) -> None:
        if not self.done.done():
            self.done.set_exception(LoadError(why))
        if self.transport is not None:
            self.transport.close()

    def finish_if_idle(self) -> None:
        if self.inflight == 0 and not self.done.done():
            self.done.set_result(None)


class Sender(LoadProtocol):
    """A connection that keeps a window of requests in flight until its deadline."""

    deadline_ns = 0  # set when the load starts
    load: Load

    def send(self, count: int, now: int) -> None:
        raise NotImplementedError

    def answered(self, count: int, now: int) -> None:
        """`count` replies came in: as many sends go out again, or after the deadline none."""
        self.inflight -= count
        self.load.answered += count
        if now < self.deadline_ns:
            self.send(count, now)
        else:
            self.finish_if_idle()

    def count_per_queue(self, per_queue: list[int]) -> int:
        raise NotImplementedError


class Reader(LoadProtocol):
    """A connection that reads every queue up to a target, one request in flight per queue."""

    deadline_ns = 0  # set when the load starts
    retries = 0

    def read(self, queue: int) -> None:
        raise NotImplementedError


P = TypeVar("P", bound=LoadProtocol)


async def connect(addr: tuple[str, int], factory: Callable[[], P]) -> P:
    loop = asyncio.get_running_loop()
    transport, protocol = await asyncio.wait_for(
        loop.create_connection(factory, *addr), CONNECT_TIMEOUT_S
    )
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return protocol


async def run_load(
    protocols: Sequence[LoadProtocol], start: Callable[[], None], meter: Meter, limit_s: float
) -> float:
    """Start the load and wait (at most `limit_s`) for every connection to finish; returns the
    elapsed seconds. What is still unanswered then is counted as such."""
    meter.start()
    t0 = time.perf_counter()
    try:
        start()
        await asyncio.wait_for(asyncio.gather(*(p.done for p in protocols)), limit_s)
    except TimeoutError:
        pass
    finally:
        elapsed = time.perf_counter() - t0
        meter.stop()
        for p in protocols:
            if p.transport is not None:
                p.transport.close()
    return elapsed


class _RemotingLoad(LoadProtocol, asyncio.BufferedProtocol):
    """Receives straight into a buffer of its own and hands over whole reply frames."""

    def __init__(self, done: asyncio.Future[None]) -> None:
        super().__init__(done)
        self._buffer = bytearray(RECEIVE_BUFFER)
        self._held = 0  # bytes at the front that no whole frame used yet

    def get_buffer(self, sizehint: int) -> memoryview:
        if len(self._buffer) - self._held < RECEIVE_BUFFER // 4:  # a big frame is arriving
            bigger = bytearray(2 * len(self._buffer))
            bigger[: self._held] = self._buffer[: self._held]
            self._buffer = bigger
        return memoryview(self._buffer)[self._held :]

    def buffer_updated(self, nbytes: int) -> None:
        buf, end = self._buffer, self._held + nbytes
        try:
            used = self.on_frames(buf, end, time.perf_counter_ns())
        except (ValueError, LookupError, struct.error, LoadError) as exc:
            self.fail(f"an unreadable reply: {exc!r}")
            return
        if used:
            buf[: end - used] = buf[used:end]  # the partial frame to the front
        self._held = end - used

    def on_frames(self, buf: bytearray, end: int, now: int) -> int:
        """Handle the whole frames in buf[:end]; returns how many bytes they took."""
        raise NotImplementedError


def _code(buf: bytearray, start: int, end: int) -> int:
    """A reply's code from its JSON header, without decoding it."""
    at = buf.find(b'"code":', start, end) + 7
    return int(buf[at : buf.find(b",", at, end)])


def _opaque(buf: bytearray, start: int, end: int) -> int:
    """A reply's opaque: ours are 10 digits, and they sit near the header's end."""
    at = buf.rfind(b'"opaque":', start, end) + 9
    return int(buf[at : at + 10])


def _frame_at(buf: bytearray, at: int, end: int) -> tuple[int, int] | None:
    """(header end, frame end) of the frame at `at`, or None if it is not all in yet."""
    if end - at < 8:
        return None
    length, marker = _PREFIX.unpack_from(buf, at)
    if at + 4 + length > end:
        return None
    if marker >> 24:
        raise LoadError(f"a reply in serialize type {marker >> 24}, not JSON")
    return at + 8 + (marker & 0xFFFFFF), at + 4 + length


class SendConnection(_RemotingLoad, Sender):
    """`window` sends in flight, round-robin over the queues' templates."""

    def __init__(
        self,
        done: asyncio.Future[None],
        templates: list[SendTemplate],
        number: int,
        first_queue: int,
        load: Load,
    ) -> None:
        super().__init__(done)
        self.templates = [t.for_connection(number) for t in templates]
        self.pieces = [t.pieces for t in self.templates]
        self.first_queue = first_queue
        self.load = load
        self.sent_at: dict[int, int] = {}
        self.next_opaque = OPAQUE_BASE
        self.failed_opaques: list[int] = []

    def send(self, count: int, now: int) -> None:
        pieces, queues, sent_at = self.pieces, len(self.pieces), self.sent_at
        turn, start = self.first_queue - OPAQUE_BASE, self.next_opaque
        frames = []
        for opaque in range(start, start + count):  # ConnectionTemplate.render, inlined
            frames.append((b"%d" % opaque).join(pieces[(turn + opaque) % queues]))
            sent_at[opaque] = now
        self.next_opaque = start + count
        self.inflight += count
        self.load.requests += count
        assert self.transport is not None
        self.transport.write(b"".join(frames))  # one buffer: cheaper than writelines' iovecs

    def on_frames(self, buf: bytearray, end: int, now: int) -> int:
        # The hot loop: a reply costs one unpack, one rfind, one startswith, one int().
        at, replies, unpack = 0, 0, _PREFIX.unpack_from
        sent_at, append = self.sent_at, self.load.latencies_ns.append
        while end - at >= 8:
            length, marker = unpack(buf, at)
            frame_end = at + 4 + length
            if frame_end > end:
                break
            if marker >> 24:
                raise LoadError(f"a reply in serialize type {marker >> 24}, not JSON")
            header_end = at + 8 + (marker & 0xFFFFFF)
            opaque = int(buf[(o := buf.rfind(b'"opaque":', at, header_end) + 9) : o + 10])
            append(now - sent_at.pop(opaque))
            if not buf.startswith(b'{"code":0,', at + 8):
                code = _code(buf, at + 8, header_end)
                self.load.failed[code] = self.load.failed.get(code, 0) + 1
                self.failed_opaques.append(opaque)
            replies += 1
            at = frame_end
        if replies:
            self.answered(replies, now)
        return at

    def count_per_queue(self, per_queue: list[int]) -> int:
        """Add each queue's acknowledged messages to `per_queue` (a send's queue follows from
        its opaque); returns their sum."""
        queues, per_send = len(self.templates), self.templates[0].messages
        sent = self.next_opaque - OPAQUE_BASE
        counts = [
            sent // queues + (1 if (q - self.first_queue) % queues < sent % queues else 0)
            for q in range(queues)
        ]
        for opaque in [*self.failed_opaques, *self.sent_at]:  # refused, or never answered
            counts[(self.first_queue + opaque - OPAQUE_BASE) % queues] -= 1
        for queue, count in enumerate(counts):
            per_queue[queue] += count * per_send
        return sum(counts) * per_send


class PullConnection(_RemotingLoad, Reader):
    """One PULL_MESSAGE in flight per queue until each queue's offset reaches its target."""

    def __init__(
        self,
        done: asyncio.Future[None],
        templates: list[PullTemplate],
        offsets: list[int],
        targets: list[int],
        load: Load,
    ) -> None:
        super().__init__(done)
        self.templates = templates
        self.offsets = offsets  # advanced in place: the caller keeps them for the next slice
        self.targets = targets
        self.load = load
        self.pending: dict[int, tuple[int, int]] = {}  # opaque -> (queue, sent ns)
        self.next_opaque = OPAQUE_BASE
        self.retries = 0

    def read(self, queue: int) -> None:
        if self.offsets[queue] >= self.targets[queue] or time.perf_counter_ns() >= self.deadline_ns:
            self.finish_if_idle()
            return
        opaque = self.next_opaque
        self.next_opaque += 1
        self.pending[opaque] = (queue, time.perf_counter_ns())
        self.inflight += 1
        self.load.requests += 1
        assert self.transport is not None
        self.transport.write(self.templates[queue].render(self.offsets[queue], opaque))

    def on_frames(self, buf: bytearray, end: int, now: int) -> int:
        at, load = 0, self.load
        while (frame := _frame_at(buf, at, end)) is not None:
            header_end, frame_end = frame
            queue, sent = self.pending.pop(_opaque(buf, at, header_end))
            self.inflight -= 1
            load.answered += 1
            load.latencies_ns.append(now - sent)
            if buf.startswith(b'{"code":0,', at + 8):
                found = _NEXT_OFFSET.search(buf, at, header_end)
                if found is None:
                    raise LoadError("a pull reply without nextBeginOffset")
                count = _count_records(buf, header_end, frame_end)
                if int(found.group(1)) - self.offsets[queue] != count:
                    raise LoadError(f"queue {queue}: {count} records do not match the offsets")
                self.offsets[queue] += count
                load.messages += count
                load.per_queue[queue] += count
                self.read(queue)
            elif (code := _code(buf, at + 8, header_end)) in _PULL_EMPTY:
                self.retries += 1  # the ConsumeQueue is behind what was acknowledged: ask again
                self.inflight += 1  # the retry is as good as in flight
                asyncio.get_running_loop().call_later(PULL_RETRY_S, self._retry, queue)
            else:
                load.failed[code] = load.failed.get(code, 0) + 1
            at = frame_end
        self.finish_if_idle()
        return at

    def _retry(self, queue: int) -> None:
        self.inflight -= 1
        self.read(queue)


@dataclass
class PopBudget:
    """Messages left to pop, shared by a load's connections: no pop goes out at 0."""

    left: int


class PopConnection(_RemotingLoad, LoadProtocol):
    """`window` consumers: each pops, acks every message it got (one ACK_MESSAGE each, written
    together) and pops again once they are all answered, until the deadline or the budget."""

    def __init__(
        self,
        done: asyncio.Future[None],
        templates: PopTemplates,
        window: int,
        budget: PopBudget,
        load: Load,
    ) -> None:
        super().__init__(done)
        self.templates = templates
        self.budget = budget
        self.load = load
        self.deadline_ns = 0  # set when the load starts
        self.pending: dict[int, tuple[int, int, bool]] = {}  # opaque -> (consumer, sent, ack?)
        self.acks_left = [0] * window
        self.next_opaque = OPAQUE_BASE
        self.empty = 0  # pops that found nothing while the budget said there was more
        self.pop_latencies_ns: list[int] = []

    def pop(self, consumer: int) -> None:
        now = time.perf_counter_ns()
        if now >= self.deadline_ns or self.budget.left <= 0:
            self.finish_if_idle()
            return
        opaque = self._sent(consumer, now, False)
        born = b"%d" % (time.time_ns() // 1_000_000)
        assert self.transport is not None
        self.transport.write(self.templates.pop.render(born, b"%d" % opaque))

    def _sent(self, consumer: int, now: int, ack: bool) -> int:
        opaque = self.next_opaque
        self.next_opaque += 1
        self.pending[opaque] = (consumer, now, ack)
        self.inflight += 1
        self.load.requests += 1
        return opaque

    def on_frames(self, buf: bytearray, end: int, now: int) -> int:
        at, load, acks_left = 0, self.load, self.acks_left
        while (frame := _frame_at(buf, at, end)) is not None:
            header_end, frame_end = frame
            consumer, sent, is_ack = self.pending.pop(_opaque(buf, at, header_end))
            self.inflight -= 1
            load.answered += 1
            ok = buf.startswith(b'{"code":0,', at + 8)
            if is_ack:
                load.latencies_ns.append(now - sent)
                if ok:
                    load.messages += 1
                else:
                    self._failed(_code(buf, at + 8, header_end))
                acks_left[consumer] -= 1
                if acks_left[consumer] == 0:
                    self.pop(consumer)
            else:
                self.pop_latencies_ns.append(now - sent)
                if ok:
                    self._ack(consumer, buf[at + 8 : header_end], bytes(buf[header_end:frame_end]))
                elif (code := _code(buf, at + 8, header_end)) in _POP_EMPTY:
                    self.empty += 1  # nothing in reach yet (a queue behind, or locked)
                    self.inflight += 1  # the retry is as good as in flight
                    asyncio.get_running_loop().call_later(POP_RETRY_S, self._retry, consumer)
                else:
                    self._failed(code)  # this consumer stops
            at = frame_end
        self.finish_if_idle()
        return at

    def _ack(self, consumer: int, header: bytearray, body: bytes) -> None:
        handles = popped_handles(self.templates, header, body)
        if not handles:
            raise LoadError("a pop answered SUCCESS with no message")
        self.load.received += len(handles)
        self.budget.left -= len(handles)
        self.acks_left[consumer] = len(handles)
        now, render = time.perf_counter_ns(), self.templates.ack.render
        frames = [
            render(
                topic.encode(),
                b"%d" % queue_id,
                handle.encode(),
                b"%d" % offset,
                b"%d" % self._sent(consumer, now, True),
            )
            for topic, queue_id, handle, offset in handles
        ]
        assert self.transport is not None
        self.transport.write(b"".join(frames))

    def _failed(self, code: int) -> None:
        self.load.failed[code] = self.load.failed.get(code, 0) + 1

    def _retry(self, consumer: int) -> None:
        self.inflight -= 1
        self.pop(consumer)


def _count_records(buf: bytearray, start: int, end: int) -> int:
    """How many stored records a pull body holds (each opens with its total size)."""
    count, unpack = 0, _I32.unpack_from
    while start < end:
        (size,) = unpack(buf, start)
        if size <= 0:
            raise LoadError(f"a record of size {size} in a pull body")
        start += size
        count += 1
    if start != end:
        raise LoadError("a pull body whose records overrun it")
    return count


async def closed_loop(
    addr: tuple[str, int],
    make: Callable[[asyncio.Future[None], int], Sender],
    *,
    queues: int,
    connections: int,
    window: int,
    seconds: float,
    meter: Meter,
    load: Load,
    drain_s: float = 30.0,
) -> Load:
    """`connections` × `window` requests in flight for `seconds`, then every reply awaited;
    `make(done, first_queue)` builds a connection."""
    loop = asyncio.get_running_loop()

    def factory(first: int) -> Callable[[], Sender]:
        return lambda: make(loop.create_future(), first)

    conns = []
    for n in range(connections):
        # each connection starts on its own queue
        conns.append(await connect(addr, factory(n * queues // connections)))

    def start() -> None:
        now = time.perf_counter_ns()
        for conn in conns:
            conn.deadline_ns = now + int(seconds * 1e9)
            conn.send(window, now)

    load.seconds = await run_load(conns, start, meter, seconds + drain_s)
    load.messages = sum(conn.count_per_queue(load.per_queue) for conn in conns)
    return load


async def read_back(
    addr: tuple[str, int],
    make: Callable[[asyncio.Future[None]], Reader],
    *,
    queues: int,
    seconds: float,
    meter: Meter,
    load: Load,
) -> Load:
    """One connection reading every queue until its target, for `seconds` at most."""
    loop = asyncio.get_running_loop()
    conn = await connect(addr, lambda: make(loop.create_future()))

    def start() -> None:
        conn.deadline_ns = time.perf_counter_ns() + int(seconds * 1e9)
        for queue in range(queues):
            conn.read(queue)
        conn.finish_if_idle()

    load.seconds = await run_load([conn], start, meter, seconds + 10.0)
    if conn.retries:
        load.notes.append(f"{conn.retries} reads found nothing new yet and were asked again")
    return load


async def produce(
    addr: tuple[str, int],
    templates: list[SendTemplate],
    connections: int,
    window: int,
    *,
    seconds: float,
    meter: Meter,
) -> Load:
    """`connections` × `window` sends in flight for `seconds`, then every reply awaited."""
    load = Load(per_queue=[0] * len(templates))
    numbers = iter(range(connections))
    return await closed_loop(
        addr,
        lambda done, first: SendConnection(done, templates, next(numbers), first, load),
        queues=len(templates),
        connections=connections,
        window=window,
        seconds=seconds,
        meter=meter,
        load=load,
    )


async def pull(
    addr: tuple[str, int],
    templates: list[PullTemplate],
    offsets: list[int],
    targets: list[int],
    *,
    seconds: float,
    meter: Meter,
) -> Load:
    """Pull each queue from `offsets` (advanced in place) up to `targets`, `seconds` at most."""
    load = Load(per_queue=[0] * len(templates))
    return await read_back(
        addr,
        lambda done: PullConnection(done, templates, offsets, targets, load),
        queues=len(templates),
        seconds=seconds,
        meter=meter,
        load=load,
    )


async def pop(
    addr: tuple[str, int],
    templates: PopTemplates,
    budget: int,
    connections: int,
    window: int,
    *,
    seconds: float,
    meter: Meter,
) -> Load:
    """`connections` × `window` consumers popping and acking for `seconds`, or until `budget`
    messages were handed out; then every reply awaited. The latencies are the acks'."""
    loop = asyncio.get_running_loop()
    load = Load()
    shared = PopBudget(budget)
    conns = [
        await connect(
            addr, lambda: PopConnection(loop.create_future(), templates, window, shared, load)
        )
        for _ in range(connections)
    ]

    def start() -> None:
        deadline = time.perf_counter_ns() + int(seconds * 1e9)
        for conn in conns:
            conn.deadline_ns = deadline
            for consumer in range(window):
                conn.pop(consumer)
            conn.finish_if_idle()

    load.seconds = await run_load(conns, start, meter, seconds + POP_DRAIN_S)
    pops = sorted(x for conn in conns for x in conn.pop_latencies_ns)
    if pops:
        load.notes.append(
            f"{len(pops)} pops, round trip p50 {percentile_ms(pops, 50):.3f} ms, "
            f"p99 {percentile_ms(pops, 99):.3f} ms"
        )
    if empty := sum(conn.empty for conn in conns):
        load.notes.append(f"{empty} pops found nothing yet and were asked again")
    if shared.left <= 0:
        load.notes.append("every message produced so far was popped: the slice ended early")
    return load

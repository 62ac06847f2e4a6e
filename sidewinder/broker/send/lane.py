"""The send lane: plain sends served straight from a connection's received bytes.

    lane = SendLane(store_address, store_port, cluster_property, reply_pieces, max_frame)
    result = lane.serve(frames, start, out, at, room, phy, stamp, queue_offsets, topic_of,
                        born_address, born_port, largest, late)

One call walks the whole frames of a connection's buffer from `start`. A send it can serve (a
JSON SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE request read by `send_v2_fields` or
`send_batch_fields`, to a topic `topic_of` gives, within its queues, no transaction, delay,
timer or transaction property, records within `largest`) has its records encoded into
`out[at:at + room]` (the CommitLog's staging window, whose first byte is physical offset `phy`)
with the next queue offsets of `queue_offsets`, and its SUCCESS reply encoded. A JSON frame
whose header opens with a code other than a send's (10, 310, 320) is left, as a span, to the
generic path. It stops at the end of the whole frames, at a send it cannot serve (so that the
sends of a connection are stored in the order they came), at a frame that is not JSON or
breaks the framing (the frame decoder then takes over from there, and raises), or at records
the window has no room for (`need`: their size; the caller makes room and calls again from
`position`).

This is route.py's shortcut for the plain case, store.commit_log's encoding and reply.py's
template, done in one pass with no object per message: `SendLanePy` is the reference, the Rust
extension's `SendLane` the same for every input (tests/broker/send/test_lane.py compares them,
and both with the full pipeline). `topic_of(name)` gives (name, encoded name, queue count) for
a topic the shortcut may send to, None for any other; it is asked once per topic per call.

The result (a LaneResult):
    position   where the walk stopped (the first frame not looked at)
    used       bytes of records written into `out` from `at`
    need       0, or the bytes of the records of the send at `position` that did not fit
    skipped    (start, end) of each frame (not a send) left to the generic path
    replies    SUCCESS frames to answer now
    later      SUCCESS frames to answer once the CommitLog up to `settle_end` is settled
    served     per stored send that is answered, packed as SERVED (opaque, queue id, first
               physical offset, queue offset, whether it waits, how many more records) then
               the others' physical offsets (">q" each): to answer it otherwise
    settle_end the CommitLog offset `later` waits for (0: none)
    topics     (name, messages, bytes, sends) per topic stored to (a batch is one send)
    touched    ((name, queue id), its queue offset before) per queue stored to
    stored     messages stored
    counts     sends stored, by how they are answered: SEND_MESSAGE_V2 now, oneway (no reply),
               later; then SEND_BATCH_MESSAGE the same (COUNTS names them)
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

from sidewinder.broker.send.body import strip_wait, waits
from sidewinder.broker.send.header import send_batch_fields, send_v2_fields
from sidewinder.broker.send.reply import ReplyPieces, success_frame
from sidewinder.common.native import implementation
from sidewinder.protocol.batch_record import BatchToStore, batch_to_store, encode_batch
from sidewinder.protocol.command import ONEWAY_FLAG, RESPONSE_FLAG
from sidewinder.protocol.record import (
    MAX_PROPERTIES_LENGTH,
    TRANSACTION_TYPE_MASK,
    Host,
    MessageToStore,
    encode_record,
)
from sidewinder.store.commit_log import RECORD_ALLOWANCE

# What `served` packs per answered send: opaque, queue id, first physical offset, queue
# offset, whether it waits to be settled, how many more records (their offsets follow).
SERVED = struct.Struct(">iiqq?H")
_PHY = struct.Struct(">q")
# What LaneResult.counts counts: (request code, how it is answered).
COUNTS = tuple((code, how) for code in (310, 320) for how in ("now", "oneway", "later"))
_FRAME = struct.Struct(">ii")
_JSON_KIND = 0
# A header that opens with its code, as every client writes it (a send code: 10, 310 or 320).
_CODE = re.compile(rb'\{"code":(-?[0-9]{1,10})[,}]')
_SEND_CODES = (b"10", b"310", b"320")
TopicOf = Callable[[str], "tuple[str, bytes, int] | None"]
QueueKey = tuple[str, int]


class LaneResult(NamedTuple):
    position: int
    used: int
    need: int
    skipped: list[tuple[int, int]]
    replies: bytes
    later: bytes
    served: bytes
    settle_end: int
    topics: list[tuple[str, int, int, int]]
    touched: list[tuple[QueueKey, int]]
    stored: int
    counts: tuple[int, int, int, int, int, int]


def served_sends(served: bytes) -> Iterator[tuple[int, int, list[int], int, bool]]:
    """(opaque, queue id, physical offsets, first queue offset, waits) of each send packed in a
    LaneResult's `served`."""
    at = 0
    while at < len(served):
        opaque, queue_id, phy, offset, waits_late, more = SERVED.unpack_from(served, at)
        at += SERVED.size
        phys = [phy, *(p for (p,) in _PHY.iter_unpack(served[at : at + 8 * more]))]
        at += 8 * more
        yield opaque, queue_id, phys, offset, waits_late


class SendLanePy:
    """The reference (see the module's docstring)."""

    def __init__(
        self,
        store_address: bytes,
        store_port: int,
        cluster_property: bytes,
        reply_pieces: ReplyPieces,
        max_frame: int,
    ) -> None:
        self.store_host = Host(store_address, store_port)
        self.cluster_property = cluster_property
        self.cluster_tail = b"\x02" + cluster_property
        # A SUCCESS header: [0] msgId: [1] and a physical offset's %016X, comma-joined for a
        # batch; [2] queue id [3] queue offset [4] opaque [5]
        self.reply_pieces = reply_pieces
        self.max_frame = max_frame

    def reply(self, opaque: int, phys: list[int], queue_id: int, queue_offset: int) -> bytes:
        return success_frame(self.reply_pieces, opaque, phys, queue_id, queue_offset)

    def serve(
        self,
        frames: bytes | bytearray | memoryview,
        start: int,
        out: bytearray | memoryview,
        at: int,
        room: int,
        phy: int,
        stamp: int,
        queue_offsets: dict[QueueKey, int],
        topic_of: TopicOf,
        born_address: bytes,
        born_port: int,
        largest: int,
        late: bool,
    ) -> LaneResult:
        data = memoryview(frames)
        born = Host(born_address, born_port)
        position, end, used, need = start, len(data), 0, 0
        skipped: list[tuple[int, int]] = []
        replies, later, served = bytearray(), bytearray(), bytearray()
        settle_end = stored = 0
        counts = [0] * 6
        known: dict[str, tuple[str, bytes, int] | None] = {}
        per_topic: dict[str, list[int]] = {}
        touched: dict[QueueKey, int] = {}
        while end - position >= 8:
            length, marker = _FRAME.unpack_from(data, position)
            kind, header_length = (marker >> 24) & 0xFF, marker & 0xFFFFFF
            if length < 4 or length > self.max_frame or kind != _JSON_KIND:
                break  # the frame decoder's to raise, or to decode
            if header_length > length - 4:
                break
            frame_end = position + 4 + length
            if frame_end > end:
                break
            body_start = position + 8 + header_length
            header = bytes(data[position + 8 : body_start])
            fields = send_v2_fields(header)
            batch = fields is None
            if batch:
                fields = send_batch_fields(header)
            planned = None
            if fields is not None:
                body = bytes(data[body_start:frame_end])
                planned = self._plain(fields, body, batch, known, topic_of, born, largest)
            if planned is None or fields is None:
                if _is_send(header):
                    break  # served in order after what came before: by the generic path
                skipped.append((position, frame_end))
                position = frame_end
                continue
            item, wait = planned
            size = item.record_size
            if used + size > room:
                need = size
                break
            opaque, flag, queue_id = fields[0], fields[1], fields[3]
            key = (item.topic_name, queue_id)
            queue_offset = queue_offsets.get(key, 0)
            touched.setdefault(key, queue_offset)
            where = {
                "queue_offset": queue_offset,
                "phy_offset": phy + used,
                "store_timestamp": stamp,
            }
            if isinstance(item, BatchToStore):
                phys = encode_batch(item, out, at + used, **where)
            else:
                encode_record(item, out, at + used, **where)
                phys = [phy + used]
            queue_offsets[key] = queue_offset + item.count
            totals = per_topic.setdefault(item.topic_name, [0, 0, 0])
            totals[0] += item.count
            totals[1] += size
            totals[2] += 1
            stored += item.count
            kind = 3 if batch else 0
            if flag & ONEWAY_FLAG:
                counts[kind + 1] += 1
            else:
                waits_late = wait and late
                reply = self.reply(opaque, phys, queue_id, queue_offset)
                if waits_late:
                    later += reply
                    settle_end = phy + used + size
                    counts[kind + 2] += 1
                else:
                    replies += reply
                    counts[kind] += 1
                served += SERVED.pack(
                    opaque, queue_id, phys[0], queue_offset, waits_late, len(phys) - 1
                )
                served += b"".join(_PHY.pack(p) for p in phys[1:])
            used += size
            position = frame_end
        return LaneResult(
            position,
            used,
            need,
            skipped,
            bytes(replies),
            bytes(later),
            bytes(served),
            settle_end,
            [(name, count, size, sends) for name, (count, size, sends) in per_topic.items()],
            list(touched.items()),
            stored,
            (counts[0], counts[1], counts[2], counts[3], counts[4], counts[5]),
        )

    def _plain(
        self,
        fields: tuple[int, int, str, int, int, int, int, int, str],
        body: bytes,
        batch: bool,
        known: dict[str, tuple[str, bytes, int] | None],
        topic_of: TopicOf,
        born: Host,
        largest: int,
    ) -> tuple[MessageToStore | BatchToStore, bool] | None:
        """The record(s) of a plain send (route.py's shortcut) and whether its producer waits,
        or None."""
        _, flag, name, queue_id, sys_flag, born_ts, msg_flag, reconsume, properties = fields
        if flag & RESPONSE_FLAG or sys_flag & TRANSACTION_TYPE_MASK:
            return None
        if name in known:
            topic = known[name]
        else:
            topic = known[name] = topic_of(name)
        if topic is None or queue_id >= topic[2]:
            return None
        if "DELAY\x01" in properties or "TIMER_DEL" in properties or "TRAN_MSG\x01" in properties:
            return None
        if len(body) > largest - RECORD_ALLOWANCE:
            return None
        if batch:
            # A timer message's properties are its own, in the body (a match is only slower).
            if b"TIMER_DEL" in body:
                return None
            shared = MessageToStore(
                topic[1], queue_id, b"", b"", 0, sys_flag, born_ts, born, self.store_host,
                reconsume,
            )  # fmt: skip
            found = batch_to_store(body, shared, self.cluster_property)
            if found is None or found.record_size > largest:
                return None
            return found, waits(found.first_properties())
        properties, wait = strip_wait(properties)
        encoded = properties.encode("utf-8", "surrogateescape").rstrip(b"\x02")
        stored = encoded + self.cluster_tail if encoded else self.cluster_property
        if len(stored) > MAX_PROPERTIES_LENGTH:
            return None
        message = MessageToStore(
            topic[1],
            queue_id,
            body,
            stored,
            msg_flag,
            sys_flag,
            born_ts,
            born,
            self.store_host,
            reconsume,
        )
        if message.record_size > largest:
            return None
        return message, wait


def _is_send(header: bytes) -> bool:
    """Whether a header may be a send's: it opens with a send's code, or not with a code."""
    found = _CODE.match(header)
    return found is None or found[1] in _SEND_CODES


SendLane = implementation("SendLane", SendLanePy)

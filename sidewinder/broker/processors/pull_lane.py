"""PULL_MESSAGE served from its frame: a received chunk's pulls read and answered in one go.

    table.set_frame_taker(PullLane(pull, latency), RequestCode.PULL_MESSAGE)

The generic path decodes a pull into a RemotingCommand, admits it into the pull pool, runs the
processor as a coroutine (it may wait for dispatch to catch up) and encodes a reply command.
This lane takes a chunk's plain pulls (a JSON PULL_MESSAGE header whose fields PullProcessor
reads as they are) and does the same steps straight: the header read (`pull_fields`), the
processor's checks once per group, topic, queue and subscription in the chunk, the store read
with the body joined natively (PullProcessor.read), the offset commit, and the reply frame from
its template (remoting.reply_template), written with the chunk's others at once. When dispatch
is behind, it waits for it first, as the processor does. A pull that finds nothing and asks to
be held is held as the processor holds it, and answered from the template when it wakes.
Anything else (a SQL92 filter, a refusal, a oneway pull, a slave or slaveReadEnable broker) is
left to the generic path, which answers it as before.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import time
from typing import Final, NamedTuple

from sidewinder.broker.processors.pull import (
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    PullProcessor,
)
from sidewinder.common.native import implementation
from sidewinder.protocol.codes import RequestCode, ResponseCode, SerializeType
from sidewinder.protocol.command import ONEWAY_FLAG
from sidewinder.protocol.headers import PullMessageRequestHeader
from sidewinder.remoting.codec import (
    FrameError,
    RawFrame,
    decode_json_header,
    decode_raw,
    encode_frame,
)
from sidewinder.remoting.dispatch import RequestContext, error_reply
from sidewinder.remoting.latency import LatencyKey, RpcLatency
from sidewinder.remoting.reply_template import pull_reply_frame

# How every JSON PULL_MESSAGE header that encode_json_header (and Java's fastjson) writes opens.
PULL_HEAD: Final = b'{"code":11,'
CheckKey = tuple[str, str, int, int, str | None, str | None]


class Pull(NamedTuple):
    frame: RawFrame
    opaque: int
    header: PullMessageRequestHeader
    codes: frozenset[int] | None  # the tags codes it filters by; None: every message


PullFields = tuple[
    int, str, str, int, int, int, int, int, int, int, str | None, str | None
]  # the request's opaque, then PullMessageRequestHeader's fields in its order


def pull_fields_py(header: bytes | bytearray | memoryview) -> PullFields | None:
    """The reference: the opaque and fields of a PULL_MESSAGE JSON header the lane can serve
    as it is, after a full decode; None for anything the generic path should decode and
    answer (or refuse) itself: another code, a oneway request, a missing or bad field. The
    Rust extension's `pull_fields` reads only plain headers (None for anything unusual);
    where it gives a tuple, it is this one's."""
    try:
        command = decode_json_header(header)
    except FrameError:
        return None
    if command.code != RequestCode.PULL_MESSAGE or command.flag & ONEWAY_FLAG:
        return None
    try:
        fields = PullMessageRequestHeader.from_ext(command.ext_fields)
    except Exception:  # a missing or bad field: the generic path names it in its refusal
        return None
    return (
        command.opaque,
        fields.consumer_group,
        fields.topic,
        fields.queue_id,
        fields.queue_offset,
        fields.max_msg_nums,
        fields.sys_flag,
        fields.commit_offset,
        fields.suspend_timeout_millis,
        fields.sub_version,
        fields.subscription,
        fields.expression_type,
    )


pull_fields = implementation("pull_fields", pull_fields_py)


class PullLane:
    def __init__(self, pull: PullProcessor, latency: RpcLatency | None = None) -> None:
        self.pull = pull
        self.latency = latency
        self.served = 0  # pulls this lane read and answered (held ones included)
        self._catching_up: set[asyncio.Task[None]] = set()

    def take_frames(self, ctx: RequestContext, frames: list[RawFrame]) -> list[RawFrame]:
        """Serve the plain pulls among `frames`; the frames left, in order."""
        pull = self.pull
        store = pull.store
        if pull.config.slave_read_enable or store.is_slave:
            return frames
        started = time.perf_counter()
        left: list[RawFrame] = []
        pulls: list[Pull] = []
        checked: dict[CheckKey, tuple[bool, frozenset[int] | None]] = {}
        for frame in frames:
            if frame.serialize_type is not SerializeType.JSON or not frame.header.startswith(
                PULL_HEAD
            ):
                left.append(frame)
                continue
            fields = pull_fields(frame.header)
            if fields is None:
                left.append(frame)
                continue
            opaque = fields[0]
            header = PullMessageRequestHeader(*fields[1:])
            key = (
                header.consumer_group,
                header.topic,
                header.queue_id,
                header.sys_flag & FLAG_SUBSCRIPTION,
                header.subscription,
                header.expression_type,
            )
            check = checked.get(key)
            if check is None:
                check = checked[key] = self._tags_codes(header)
            servable, codes = check
            if not servable:
                left.append(frame)
                continue
            pulls.append(Pull(frame, opaque, header, codes))
        if pulls:
            if store.is_caught_up:
                self._serve(ctx, pulls, started)
            else:
                # As the processor does: wait (briefly) for dispatch, so a pull right after a
                # write sees it.
                task = asyncio.get_running_loop().create_task(self._caught_up(ctx, pulls, started))
                self._catching_up.add(task)  # a task must be held while it runs
                task.add_done_callback(self._catching_up.discard)
        return left

    async def _caught_up(self, ctx: RequestContext, pulls: list[Pull], started: float) -> None:
        await self.pull.store.caught_up()
        self._serve(ctx, pulls, started)

    def _serve(self, ctx: RequestContext, pulls: list[Pull], started: float) -> None:
        pull = self.pull
        out: list[bytes] = []
        answered: collections.Counter[LatencyKey] = collections.Counter()
        for frame, opaque, header, codes in pulls:
            try:
                answer = pull.read(header, codes, None)
                pull.commit_offset(header)
            except Exception as exc:  # our bug: answered as the generic path answers it
                out.append(encode_frame(error_reply(decode_raw(frame), exc)))
                answered[
                    (
                        RequestCode.PULL_MESSAGE,
                        ResponseCode.SYSTEM_ERROR,
                        False,
                        "process_request_failed",
                    )
                ] += 1
                continue
            self.served += 1
            held = bool(header.sys_flag & FLAG_SUSPEND)
            if answer.code == ResponseCode.PULL_NOT_FOUND and held:
                pull.hold(
                    header, functools.partial(self._wake, ctx, opaque, header, codes, started)
                )
                continue
            out += pull_reply_frame(opaque, *answer)
            answered[(RequestCode.PULL_MESSAGE, answer.code, held, "success")] += 1
        if out:
            ctx.write_frames(out)
        if self.latency is not None and answered:
            elapsed_ms = (time.perf_counter() - started) * 1000
            for latency_key, count in answered.items():
                self.latency.observe(latency_key, elapsed_ms, count)

    def _tags_codes(self, header: PullMessageRequestHeader) -> tuple[bool, frozenset[int] | None]:
        """Whether the processor's checks pass with a tags filter (or none), and its codes."""
        try:
            codes, predicate = self.pull.check(header)
        except Exception:  # a refusal: the generic path answers it with its code and remark
            return False, None
        return predicate is None, codes

    def _wake(
        self,
        ctx: RequestContext,
        opaque: int,
        header: PullMessageRequestHeader,
        codes: frozenset[int] | None,
        started: float,
    ) -> None:
        """A held pull served again (a message arrived, or the hold timed out); timed from
        its arrival, as the generic path times a held pull."""
        answer = self.pull.read(header, codes, None)
        ctx.write_frames(pull_reply_frame(opaque, *answer))
        if self.latency is not None:
            key = (RequestCode.PULL_MESSAGE, answer.code, True, "success")
            self.latency.observe(key, (time.perf_counter() - started) * 1000)

"""SendProcessor: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).

    send = SendProcessor(config, store, topics, groups, max_delay_level, timer, ...)
    table.register(send, SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE)
    table.set_frame_lane(send, SEND_MESSAGE_V2)

Three entries, one pipeline (decode -> route -> store -> reply):
- `take_buffer`: the frame lane. The send lane (lane.py, natively in native/src/send_lane.rs)
  walks a connection's received bytes and stores the plain SEND_MESSAGE_V2 frames straight into
  the CommitLog's staging window (MessageStore.append_encoded) with their replies encoded: the
  route step's shortcut, the record encode and the reply template in one pass, no object per
  message. It stops at the first send it cannot take as it is; that one and the rest go on
  through the generic decode into `take_batch`.
- `take_batch`: the decoded requests of one chunk, each through the whole route step without
  waiting; those that must wait (a topic to make) are left to `process`.
- `process`: one request, the route step awaited where it must.
What a chunk's sends store goes to the store in one append, and their replies in one write; a
producer that waits (WAIT, under SYNC_FLUSH or SYNC_MASTER) is answered once `settled` says
so. With metrics on, every request is timed here into rocketmq_rpc_latency (a chunk's with one
clock reading when it came in).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from operator import attrgetter

import structlog

from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.groups import SubscriptionGroups
from sidewinder.broker.send.lane import COUNTS, LaneResult, SendLane, SendLanePy, served_sends
from sidewinder.broker.send.reply import STORED_CODES, SendReplies
from sidewinder.broker.send.request import host_of, request_from_command
from sidewinder.broker.send.route import Item, Routed, SendRouter
from sidewinder.broker.timer import TimerSettings
from sidewinder.broker.topics import TopicTable
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import ONEWAY_FLAG, RemotingCommand
from sidewinder.protocol.errors import SidewinderError
from sidewinder.protocol.record import Host
from sidewinder.remoting.codec import encode_frame
from sidewinder.remoting.dispatch import RequestContext, error_reply
from sidewinder.remoting.latency import LatencyKey, RpcLatency
from sidewinder.store.commit_log import QueueKey
from sidewinder.store.message_store import AppendedMany, MessageStore, PutStatus

log = structlog.get_logger(__name__)
_new = tuple.__new__  # a LaneResult of the native lane's plain tuple
_COUNT = attrgetter("count")  # how many messages an item holds


class SendProcessor:
    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicTable,
        groups: SubscriptionGroups,
        max_delay_level: int = 0,
        timer: TimerSettings | None = None,
        topics_changed: Callable[[], Awaitable[None]] | None = None,
        latency: RpcLatency | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.store_host = host_of(config.broker_addr)
        self.router = SendRouter(
            config, store, topics, groups, self.store_host, max_delay_level, timer, topics_changed
        )
        self.replies = SendReplies(config, self.store_host)
        self.latency = latency  # None: metrics off, nothing timed
        # False: every request one at a time through `process` (tests' reference run).
        self.chunks = True
        self.batched = 0  # messages stored a chunk at a time, ever
        self._lane: tuple[object, SendLanePy] | None = None  # (what it was made for, the lane)

    def born_host(self, address: str) -> Host:
        return host_of(address) if address != "?" else self.store_host

    # -- one request -------------------------------------------------------------------------------
    async def process(self, ctx: RequestContext, command: RemotingCommand) -> RemotingCommand:
        started = time.perf_counter()
        try:
            response = await self._process(ctx, command)
        except Exception as exc:
            if self.latency is not None:
                self._observe_one(command, _refused_code(exc), started)
            raise
        if self.latency is not None:
            self._observe_one(command, response.code, started)
        return response

    async def _process(self, ctx: RequestContext, command: RemotingCommand) -> RemotingCommand:
        request = request_from_command(command)
        remote = ctx.remote_address
        routed = await self.router.route(request, self.born_host(remote), remote)
        _, item, wait, _ = routed
        appended = self.store.append_many([item])
        if not appended.phy_offsets:
            return self.replies.unavailable(request, appended.remark)
        phy, offset = appended.phy_offsets[0], appended.queue_offsets[0]
        if wait and self.store.acknowledges_late:
            try:
                status = await self.store.settled(appended.end_offset)
            except Exception as exc:  # FlushError: the disk failed
                return self.replies.unavailable(request, str(exc))
            if status is not PutStatus.PUT_OK:
                remark = self.store.settle_remark(status)
                return self.replies.stored(routed, phy, offset, status, remark)
        return self.replies.stored(routed, phy, offset)

    # -- a chunk -----------------------------------------------------------------------------------
    def take_batch(
        self, ctx: RequestContext, commands: list[RemotingCommand]
    ) -> list[RemotingCommand]:
        """The decoded requests of one chunk: served, or returned for `process` (to wait)."""
        if not self.chunks:
            return commands
        started = time.perf_counter() if self.latency is not None else 0.0
        remote = ctx.remote_address
        born = self.born_host(remote)
        route_now, largest = self.router.route_now, self.router.fast_limit()
        asks: list[Routed] = []
        items: list[Item] = []
        refused: list[bytes] = []
        others: list[RemotingCommand] = []
        for command in commands:
            try:
                request = request_from_command(command)
                routed = route_now(request, born, remote, largest)
            except Exception as exc:
                refused.append(self._refused_frame(command, exc, started))
                continue
            if routed is None:
                others.append(command)
            else:
                asks.append(routed)
                items.append(routed[1])
        if asks or refused:
            self._store_and_answer(ctx, asks, items, refused, started)
        return others

    def take_buffer(
        self, ctx: RequestContext, buffer: bytearray, start: int, max_frame: int
    ) -> tuple[int, list[tuple[int, int]]]:
        """The frame lane (remoting.dispatch.FrameLane): plain sends served by the send lane
        (lane.py) straight from the connection's buffer into the CommitLog; where it stopped
        and the frames it left."""
        if not self.chunks:
            return start, []
        largest = self.router.fast_limit()
        if largest < 0:
            return start, []
        started = time.perf_counter()
        lane = self._send_lane(max_frame)
        born = self.born_host(ctx.remote_address)
        late = self.store.acknowledges_late
        topic_of = self.router.lane_topic
        results: list[LaneResult] = []
        position = start

        def write(
            out: memoryview, at: int, room: int, phy: int, stamp: int, offsets: dict[QueueKey, int]
        ) -> tuple[int, int, list[tuple[QueueKey, int]]]:
            nonlocal position
            result: LaneResult = _new(LaneResult, lane.serve(
                buffer, position, out, at, room, phy, stamp, offsets, topic_of,
                born.address, born.port, largest, late,
            ))  # fmt: skip
            results.append(result)
            position = result.position
            return result.used, result.need, result.touched

        try:
            self.store.append_encoded(write)
        except Exception as exc:  # the file write failed: nothing served is known stored
            log.warning("send.lane_write_failed", error=repr(exc))
            self._lane_refused(ctx, results, str(exc))
        else:
            if not results:
                return start, []  # the store takes no writes: the generic path says why
            self._lane_answer(ctx, results, started)
        return position, [span for result in results for span in result.skipped]

    def _send_lane(self, max_frame: int) -> SendLanePy:
        frames = self.replies.current_frames()
        key = (frames.key, max_frame)
        if self._lane is None or self._lane[0] != key:
            host = self.store_host
            lane = SendLane(
                host.address, host.port, self.router.cluster_property, frames.pieces, max_frame
            )
            self._lane = (key, lane)
        return self._lane[1]

    def _lane_answer(self, ctx: RequestContext, results: list[LaneResult], started: float) -> None:
        stored = 0
        replies: list[bytes] = []
        topics: list[tuple[str, int, int, int]] = []
        later: list[bytes] = []
        settle_end = 0
        for result in results:
            if not result.stored:
                continue
            stored += result.stored
            topics += result.topics
            if result.replies:
                replies.append(result.replies)
            if result.later:
                later.append(result.later)
                settle_end = result.settle_end
        if not stored:
            return
        if replies:
            ctx.write_frames(replies)
        self.batched += stored
        self.store.count_encoded(topics, (time.perf_counter() - started) * 1000)
        if self.latency is not None:
            self._observe_lane(results, ResponseCode.SUCCESS, started, late=False)
        if later:
            self.store.settled(settle_end).add_done_callback(
                lambda done: self._lane_settled(ctx, results, later, done, started)
            )

    def _lane_settled(
        self,
        ctx: RequestContext,
        results: list[LaneResult],
        later: list[bytes],
        done: asyncio.Future[PutStatus],
        started: float,
    ) -> None:
        """Answer the lane's waiting producers once the CommitLog is settled for them."""
        error, status = _settled(done)
        code: int = ResponseCode.SUCCESS
        if status is PutStatus.PUT_OK:
            ctx.write_frames(later)
        else:
            code = STORED_CODES.get(status, ResponseCode.SERVICE_NOT_AVAILABLE)
            remark = str(error) if error is not None else self.store.settle_remark(status)
            frames = []
            for opaque, queue_id, phys, offset, waits in _served(results):
                if not waits:
                    continue
                if error is not None:
                    reply = self.replies.unavailable_to(opaque, remark)
                else:
                    reply = self.replies.lane_stored(opaque, phys, queue_id, offset, status, remark)
                frames.append(encode_frame(reply))
            ctx.write_frames(frames)
        if self.latency is not None:
            self._observe_lane(results, code, started, late=True)

    def _lane_refused(self, ctx: RequestContext, results: list[LaneResult], remark: str) -> None:
        """Every request the lane served, answered SERVICE_NOT_AVAILABLE (a failed write)."""
        frames = [
            encode_frame(self.replies.unavailable_to(opaque, remark))
            for opaque, *_ in _served(results)
        ]
        if frames:
            ctx.write_frames(frames)

    def _refused_frame(self, command: RemotingCommand, exc: Exception, started: float) -> bytes:
        response = error_reply(command, exc)
        if self.latency is not None:
            self._observe_one(command, response.code, started)
        return b"" if command.flag & ONEWAY_FLAG else encode_frame(response)

    def _store_and_answer(
        self,
        ctx: RequestContext,
        asks: list[Routed],
        items: list[Item],
        refused: list[bytes],
        started: float,
    ) -> None:
        """Append the chunk's items (`items[n]` is `asks[n]`'s) and answer: at once, or once
        settled for a producer that waits; `refused`: the chunk's refusals, encoded."""
        appended = self.store.append_many(items)
        answered = len(appended.phy_offsets)  # the first ones
        self.batched += sum(map(_COUNT, items[:answered]))
        now: range | list[int] = range(answered)  # indexes answered at once
        later: list[int] = []  # answered once settled
        if self.store.acknowledges_late:
            now = []
            for n in range(answered):
                (later if asks[n][2] else now).append(n)
        frames = self._stored_frames(asks, appended, now)
        replies = self.replies
        for n in range(answered, len(asks)):
            request = asks[n][0]
            if not request.flag & ONEWAY_FLAG:
                frames.append(encode_frame(replies.unavailable(request, appended.remark)))
        frames += refused
        if frames:
            ctx.write_frames([f for f in frames if f])
        if self.latency is not None:
            self._observe(asks, now, ResponseCode.SUCCESS, started)
            failed = range(answered, len(asks))
            self._observe(asks, failed, ResponseCode.SERVICE_NOT_AVAILABLE, started)
        if later:
            last = later[-1]
            end = appended.phy_offsets[last] + asks[last][1].record_size
            self.store.settled(end).add_done_callback(
                lambda done: self._answer_settled(ctx, asks, appended, later, done, started)
            )

    def _answer_settled(
        self,
        ctx: RequestContext,
        asks: list[Routed],
        appended: AppendedMany,
        indexes: list[int],
        done: asyncio.Future[PutStatus],
        started: float,
    ) -> None:
        error, status = _settled(done)
        code: int = ResponseCode.SUCCESS
        if status is PutStatus.PUT_OK:
            frames = self._stored_frames(asks, appended, indexes)
        else:
            frames = []
            code = STORED_CODES.get(status, ResponseCode.SERVICE_NOT_AVAILABLE)
            remark = self.store.settle_remark(status)
            for n in indexes:
                routed = asks[n]
                request = routed[0]
                if request.flag & ONEWAY_FLAG:
                    continue
                if error is not None:
                    reply = self.replies.unavailable(request, str(error))
                else:
                    phy, offset = appended.phy_offsets[n], appended.queue_offsets[n]
                    reply = self.replies.stored(routed, phy, offset, status, remark)
                frames.append(encode_frame(reply))
        ctx.write_frames([f for f in frames if f])
        if self.latency is not None:
            self._observe(asks, indexes, code, started)

    def _stored_frames(
        self, asks: list[Routed], appended: AppendedMany, indexes: range | list[int]
    ) -> list[bytes]:
        """The SUCCESS replies to stored sends (none to a oneway one)."""
        return self.replies.stored_frames(
            asks, appended.phy_offsets, appended.queue_offsets, indexes
        )

    # -- rocketmq_rpc_latency ----------------------------------------------------------------------
    def _observe(
        self, asks: list[Routed], indexes: range | list[int], response_code: int, started: float
    ) -> None:
        """Record these answered requests, each with the time since their chunk came in."""
        assert self.latency is not None
        elapsed_ms = (time.perf_counter() - started) * 1000
        counts: dict[LatencyKey, int] = {}
        for n in indexes:
            request = asks[n][0]
            if request.flag & ONEWAY_FLAG:
                key = (request.code, -1, False, "oneway")
            else:
                key = (request.code, response_code, False, "success")
            counts[key] = counts.get(key, 0) + 1
        for key, times in counts.items():
            self.latency.observe(key, elapsed_ms, times)

    def _observe_lane(
        self, results: list[LaneResult], response_code: int, started: float, *, late: bool
    ) -> None:
        """Record the lane's requests answered now (`late`: those answered once settled)."""
        assert self.latency is not None
        elapsed_ms = (time.perf_counter() - started) * 1000
        counts = [0] * len(COUNTS)
        for result in results:
            counts = [a + b for a, b in zip(counts, result.counts, strict=True)]
        for (code, how), count in zip(COUNTS, counts, strict=True):
            if not count or (how == "later") != late:
                continue
            if how == "oneway":
                key: LatencyKey = (code, -1, False, "oneway")
            else:
                key = (code, response_code, False, "success")
            self.latency.observe(key, elapsed_ms, count)

    def _observe_one(self, command: RemotingCommand, response_code: int, started: float) -> None:
        assert self.latency is not None
        if command.is_oneway:
            key: LatencyKey = (command.code, -1, False, "oneway")
        elif response_code < 0:
            key = (command.code, ResponseCode.SYSTEM_ERROR, False, "process_request_failed")
        else:
            key = (command.code, response_code, False, "success")
        self.latency.observe(key, (time.perf_counter() - started) * 1000)


def _served(results: list[LaneResult]) -> Iterator[tuple[int, int, list[int], int, bool]]:
    """(opaque, queue id, physical offsets, queue offset, waits) of each send the lane served
    and owes an answer."""
    for result in results:
        yield from served_sends(result.served)


def _settled(done: asyncio.Future[PutStatus]) -> tuple[BaseException | None, PutStatus]:
    """What a settled future says: the error (a failed flush) or None, and the status."""
    error = done.exception()
    return error, PutStatus.SERVICE_NOT_AVAILABLE if error is not None else done.result()


def _refused_code(exc: Exception) -> int:
    """The response code a raised refusal is answered with; -1 for our bug."""
    return exc.code if isinstance(exc, SidewinderError) else -1

"""SendProcessor: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).

    send = SendProcessor(config, store, topics, groups, max_delay_level, timer, ...)
    table.register(send, SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE)
    table.set_frame_lane(send, SEND_MESSAGE_V2)

Three entries, one pipeline (decode -> route -> store -> reply):
- `take_frames`: the request frames of one received chunk; a plain JSON send is decoded by the
  fast header reader (request.requests_from_frames); the others are left to the generic decode.
- `take_batch`: the decoded requests of one chunk, each through the whole route step without
  waiting; those that must wait (a topic to make) are left to `process`.
- `process`: one request, the route step awaited where it must.
What a chunk's sends store goes to the store in one `append_many` (one CommitLog append), and
their replies in one write; a producer that waits (WAIT, under SYNC_FLUSH or SYNC_MASTER) is
answered once `settled` says so. With metrics on, every request is timed here into
rocketmq_rpc_latency (a chunk's with one clock reading when it came in).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from operator import attrgetter

from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.groups import SubscriptionGroups
from sidewinder.broker.send.reply import STORED_CODES, SendReplies
from sidewinder.broker.send.request import (
    host_of,
    request_from_command,
    requests_from_frames,
)
from sidewinder.broker.send.route import Item, Routed, SendRouter
from sidewinder.broker.timer import TimerSettings
from sidewinder.broker.topics import TopicTable
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import ONEWAY_FLAG, RemotingCommand
from sidewinder.protocol.errors import SidewinderError
from sidewinder.protocol.record import Host
from sidewinder.remoting.codec import RawFrame, encode_frame
from sidewinder.remoting.dispatch import RequestContext, error_reply
from sidewinder.remoting.latency import LatencyKey, RpcLatency
from sidewinder.store.message_store import AppendedMany, MessageStore, PutStatus

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

    def take_frames(self, ctx: RequestContext, frames: list[RawFrame]) -> list[RawFrame]:
        """The frames of one chunk: the plain sends read by the fast decoder served, the rest
        returned undecoded."""
        if not self.chunks:
            return frames
        started = time.perf_counter() if self.latency is not None else 0.0
        remote = ctx.remote_address
        born = self.born_host(remote)
        route_now, largest = self.router.route_now, self.router.fast_limit()
        asks: list[Routed] = []
        items: list[Item] = []
        others: list[RawFrame] = []
        for frame, request in zip(frames, requests_from_frames(frames), strict=True):
            if request is not None:
                routed = route_now(request, born, remote, largest)
                if routed is not None:
                    asks.append(routed)
                    items.append(routed[1])
                    continue
            others.append(frame)
        if asks:
            self._store_and_answer(ctx, asks, items, [], started)
        return others

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
        error = done.exception()
        status = PutStatus.SERVICE_NOT_AVAILABLE if error is not None else done.result()
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

    def _observe_one(self, command: RemotingCommand, response_code: int, started: float) -> None:
        assert self.latency is not None
        if command.is_oneway:
            key: LatencyKey = (command.code, -1, False, "oneway")
        elif response_code < 0:
            key = (command.code, ResponseCode.SYSTEM_ERROR, False, "process_request_failed")
        else:
            key = (command.code, response_code, False, "success")
        self.latency.observe(key, (time.perf_counter() - started) * 1000)


def _refused_code(exc: Exception) -> int:
    """The response code a raised refusal is answered with; -1 for our bug."""
    return exc.code if isinstance(exc, SidewinderError) else -1

"""PEEK_MESSAGE (200052), NOTIFICATION (200054) and POLLING_INFO (200055): looking at what a
POP consumer would get, without taking it.

- PEEK reads up to maxMsgNums from the group's offsets (the retry topic first one time in
  five), moving nothing; PULL_NOT_FOUND when there is nothing.
- NOTIFICATION answers hasMsg, held up to pollTime as a pop is when there is nothing yet.
- POLLING_INFO counts the pops held under topic@group@queueId.
"""

from __future__ import annotations

import random

from sidewinder.broker.pop.checks import read_offset, readable_queue
from sidewinder.broker.pop.context import PopContext, now_ms
from sidewinder.broker.pop.polling import Hold, PopHolds
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.pop import (
    NotificationRequestHeader,
    NotificationResponseHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageResponseHeader,
    polling_key,
    pop_retry_topic,
)
from sidewinder.remoting.dispatch import RequestContext


class PeekMessageProcessor:
    def __init__(self, pop: PopContext) -> None:
        self.pop = pop
        self._random = random.Random()

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = PeekMessageRequestHeader.from_ext(request.ext_fields)
        topic = readable_queue(self.pop, header.topic, header.queue_id, header.consumer_group)
        await self.pop.store.caught_up()
        random_q = self._random.randrange(100)
        retry = self.pop.retry_topic(header.topic, header.consumer_group)
        retry_config = self.pop.topics.get(retry)
        retry_queues = retry_config.read_queue_nums if retry_config is not None else 0
        plan: list[tuple[str, int]] = []
        retry_first = random_q % 5 == 0
        retry_plan = [(retry, (random_q + i) % retry_queues) for i in range(retry_queues)]
        if retry_first:
            plan += retry_plan
        if header.queue_id < 0:
            queues = topic.read_queue_nums
            plan += [(header.topic, (random_q + i) % queues) for i in range(queues)]
        else:
            plan.append((header.topic, header.queue_id))
        records: list[bytes] = []
        rest = 0
        for name, queue_id in plan + ([] if retry_first else retry_plan):
            rest, records = self._peek(header, name, queue_id, rest, records)
        code = ResponseCode.SUCCESS if records else ResponseCode.PULL_NOT_FOUND
        answer = PopMessageResponseHeader(0, 0, 0, rest)
        return request.reply(
            code,
            "FOUND" if records else "NO_MESSAGE_IN_QUEUE",
            ext_fields=answer.to_ext(),
            body=b"".join(records) if records else None,
        )

    def _peek(
        self,
        header: PeekMessageRequestHeader,
        topic: str,
        queue_id: int,
        rest: int,
        records: list[bytes],
    ) -> tuple[int, list[bytes]]:
        store = self.pop.store
        offset = read_offset(self.pop, topic, header.consumer_group, queue_id)
        rest += store.max_offset_in_queue(topic, queue_id) - offset
        room = header.max_msg_nums - len(records)
        if room <= 0:
            return rest, records
        got = store.get_messages(topic, queue_id, offset, room)
        if not got.messages and got.next_begin_offset != offset:
            got = store.get_messages(topic, queue_id, got.next_begin_offset, room)
        return rest, records + [bytes(view) for view in got.messages]


class NotificationProcessor:
    def __init__(self, pop: PopContext, holds: PopHolds) -> None:
        self.pop = pop
        self.holds = holds
        self._random = random.Random()

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = NotificationRequestHeader.from_ext(request.ext_fields)
        topic = readable_queue(self.pop, header.topic, header.queue_id, header.consumer_group)
        group = header.consumer_group
        full = False
        while True:
            await self.pop.store.caught_up()
            if self._has_message(header, topic.read_queue_nums):
                break
            key = polling_key(header.topic, group, header.queue_id)
            watched = [header.topic, pop_retry_topic(header.topic, group)]
            watched.append(pop_retry_topic(header.topic, group, v2=True))
            expires = header.born_time + header.poll_time
            if header.poll_time <= 0:
                break
            held, woken = self.holds.hold(key, watched, expires, now_ms())
            if held is not Hold.HELD or woken is None:
                full = held is Hold.FULL
                break
            await woken
            if now_ms() >= expires:
                # Served once more at the end, as RocketMQ's expired request is.
                await self.pop.store.caught_up()
                break
        has = self._has_message(header, topic.read_queue_nums)
        answer = NotificationResponseHeader(has_msg=has, polling_full=full)
        return request.reply(ResponseCode.SUCCESS, ext_fields=answer.to_ext())

    def _has_message(self, header: NotificationRequestHeader, queues: int) -> bool:
        group, config = header.consumer_group, self.pop.config
        names = [self.pop.retry_topic(header.topic, group)]
        if config.enable_retry_topic_v2 and config.retrieve_message_from_pop_retry_topic_v1:
            names.append(pop_retry_topic(header.topic, group))
        targets = [(name, q) for name in names for q in self._queues(name)]
        if header.queue_id < 0:
            targets += [(header.topic, q) for q in range(queues)]
        else:
            targets.append((header.topic, header.queue_id))
        store = self.pop.store
        return any(
            store.max_offset_in_queue(name, q) > read_offset(self.pop, name, group, q)
            for name, q in targets
        )

    def _queues(self, name: str) -> range:
        config = self.pop.topics.get(name)
        return range(config.read_queue_nums if config is not None else 0)


class PollingInfoProcessor:
    def __init__(self, pop: PopContext, holds: PopHolds) -> None:
        self.pop = pop
        self.holds = holds

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = PollingInfoRequestHeader.from_ext(request.ext_fields)
        readable_queue(self.pop, header.topic, header.queue_id, header.consumer_group)
        held = self.holds.polling(polling_key(header.topic, header.consumer_group, header.queue_id))
        answer = PollingInfoResponseHeader(held)
        return request.reply(ResponseCode.SUCCESS, ext_fields=answer.to_ext())

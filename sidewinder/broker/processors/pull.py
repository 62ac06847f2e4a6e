"""PULL_MESSAGE (11): read a queue through the store, hold the pull when there is nothing yet.

Statuses map to codes as RocketMQ 4.9's PullMessageProcessor maps them (`_CODES`: expected
outcomes, replies); every such reply carries all four response header fields (Java rejects one
without them). Refusals (no permission, unknown group or topic, a bad queue id or filter) are
raised, and answered by remoting's dispatcher with their code and remark only, as RocketMQ does.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable
from typing import NamedTuple

from sidewinder.broker.clients import Clients
from sidewinder.broker.config import PERM_READ, BrokerConfig
from sidewinder.broker.groups import SubscriptionGroups
from sidewinder.broker.long_polling import HeldPull, PullHolds
from sidewinder.broker.offsets import ConsumerOffsets
from sidewinder.broker.pull_stats import PullStats
from sidewinder.broker.sql_filter import Predicate, SqlFilterError, compile_sql
from sidewinder.broker.topics import TopicTable
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import (
    NoPermission,
    SidewinderError,
    SubscriptionGroupNotExist,
    SubscriptionNotExist,
    SubscriptionParseFailed,
    TopicNotExist,
)
from sidewinder.protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader
from sidewinder.protocol.record import MessageRecord, decode_record
from sidewinder.protocol.subscription import parse_tag_expression
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.remoting.reply_template import pull_reply_header
from sidewinder.store.message_store import GetResult, GetStatus, MessageStore

FLAG_COMMIT_OFFSET, FLAG_SUSPEND, FLAG_SUBSCRIPTION = 0x1, 0x2, 0x4


@functools.lru_cache(maxsize=1024)
def compiled(expression: str) -> Predicate:
    return compile_sql(expression)


def _record_filter(predicate: Predicate) -> Callable[[memoryview], bool]:
    def matches(view: memoryview) -> bool:
        record = decode_record(view)
        return isinstance(record, MessageRecord) and predicate(record.properties())

    return matches


# StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE: what the in-memory ratio is a share of.
PHYSICAL_MEMORY = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."

_CODES = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


class PullAnswer(NamedTuple):
    """What a pull's reply says: its code, remark, the four header numbers and the body."""

    code: int
    remark: str | None
    suggest: int
    next_begin: int
    min_offset: int
    max_offset: int
    body: bytes | None


class PullProcessor:
    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicTable,
        groups: SubscriptionGroups,
        clients: Clients,
        offsets: ConsumerOffsets,
        holds: PullHolds,
        stats: PullStats | None = None,
    ) -> None:
        self.config = config
        self.stats = stats if stats is not None else PullStats()
        self.store = store
        self.topics = topics
        self.groups = groups
        self.clients = clients
        self.offsets = offsets
        self.holds = holds

    async def process(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        header = PullMessageRequestHeader.from_ext(request.ext_fields)
        if (
            request.code == RequestCode.LITE_PULL_MESSAGE
            and not self.config.lite_pull_message_enable
        ):
            # Checked after the broker's read permission in RocketMQ 5; both refuse the same.
            self._check_broker_readable()
            raise NoPermission(
                f"the broker[{self.config.broker_ip1}] for lite pull consumer is forbidden"
            )
        codes, predicate = self.check(header)
        record_filter = _record_filter(predicate) if predicate is not None else None
        await self.store.caught_up()
        response = self._pull(request, header, codes, record_filter)
        suspend = header.sys_flag & FLAG_SUSPEND
        self.commit_offset(header)
        if response.code != ResponseCode.PULL_NOT_FOUND or not suspend:
            return response
        answered: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()

        def retry() -> None:
            if not answered.done():
                answered.set_result(self._pull(request, header, codes, record_filter))

        self.hold(header, retry)
        return await answered

    def hold(self, header: PullMessageRequestHeader, retry: Callable[[], None]) -> None:
        """Hold a pull that found nothing (long polling): `retry` serves it again and
        answers, once a message arrives for its queue or the hold times out."""
        timeout_ms = (
            header.suspend_timeout_millis
            if self.config.long_polling_enable
            else self.config.short_polling_time_mills
        )
        self.holds.hold(
            HeldPull(header.topic, header.queue_id, header.queue_offset, retry), timeout_ms / 1000
        )

    def _check_broker_readable(self) -> None:
        if not self.config.broker_permission & PERM_READ:
            raise NoPermission(f"the broker[{self.config.broker_ip1}] pulling message is forbidden")

    def check(
        self, header: PullMessageRequestHeader
    ) -> tuple[frozenset[int] | None, Predicate | None]:
        """The tag codes and SQL92 predicate the pull filters by; raises the refusals."""
        self._check_broker_readable()
        group = self.groups.find(header.consumer_group)
        if group is None:
            raise SubscriptionGroupNotExist(
                f"subscription group [{header.consumer_group}] does not exist, {FAQ.strip()}"
            )
        if not group.consume_enable:
            raise NoPermission(f"subscription group no permission, {header.consumer_group}")
        topic = self.topics.get(header.topic)
        if topic is None:
            raise TopicNotExist(f"topic[{header.topic}] not exist, apply first please!{FAQ}")
        if not topic.perm & PERM_READ:
            raise NoPermission(f"the topic[{header.topic}] pulling message is forbidden")
        if not 0 <= header.queue_id < topic.read_queue_nums:
            raise SidewinderError(
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                f"topicConfig.readQueueNums:[{topic.read_queue_nums}] "
                f"consumer:[{header.consumer_group}]"
            )
        if header.sys_flag & FLAG_SUBSCRIPTION:
            kind = (header.expression_type or "TAG").upper()
            if kind == "TAG":
                return parse_tag_expression(header.subscription)[1], None
            return None, self._sql(kind, header.subscription or "")
        subscription = self.clients.subscription(header.consumer_group, header.topic)
        if subscription is None:
            if header.consumer_group not in self.clients.consumers:
                raise SubscriptionNotExist(f"the consumer's group info not exist{FAQ}")
            raise SubscriptionNotExist(f"the consumer's subscription not exist{FAQ}")
        if subscription.expression_type.upper() != "TAG":
            return None, self._sql(subscription.expression_type.upper(), subscription.sub_string)
        return subscription.codes, None

    def _sql(self, kind: str, expression: str) -> Predicate:
        if kind != "SQL92" or not self.config.enable_property_filter:
            raise SidewinderError(
                f"The broker does not support consumer to filter message by {kind}"
            )
        try:
            return compiled(expression)
        except SqlFilterError as exc:
            raise SubscriptionParseFailed(
                f"parse the consumer's subscription[{expression}] failed: {exc}"
            ) from None

    def _pull(
        self,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        codes: frozenset[int] | None,
        record_filter: Callable[[memoryview], bool] | None,
    ) -> RemotingCommand:
        answer = self.read(header, codes, record_filter)
        ext = PullMessageResponseHeader(
            answer.suggest, answer.next_begin, answer.min_offset, answer.max_offset
        ).to_ext()
        reply = request.reply(answer.code, answer.remark, ext_fields=ext, body=answer.body)
        reply.encoded_header = pull_reply_header(
            reply, answer.suggest, answer.next_begin, answer.min_offset, answer.max_offset
        )
        return reply

    def read(
        self,
        header: PullMessageRequestHeader,
        codes: frozenset[int] | None,
        record_filter: Callable[[memoryview], bool] | None,
    ) -> PullAnswer:
        """The store read of a checked pull, and what its reply says (counted in the stats)."""
        got = self.store.get_messages(
            header.topic,
            header.queue_id,
            header.queue_offset,
            header.max_msg_nums,
            tags_codes=codes,
            record_filter=record_filter,
            joined=True,
        )
        code = self._code(got, header.queue_offset)
        suggest = self._suggested_broker(header, got) if self.config.slave_read_enable else 0
        if code == ResponseCode.PULL_OFFSET_MOVED and self.store.is_slave:
            # A slave does not move a consumer's offset (offsetCheckInSlave is off): it asks
            # for a retry, and names the group's broker.
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
            group = self.groups.find(header.consumer_group)
            suggest = group.broker_id if group is not None else 0
        self.stats.pulled(
            header.topic,
            header.consumer_group,
            header.queue_id,
            got.count,
            got.buffer_total_size,
            got.next_begin_offset,
        )
        return PullAnswer(
            code,
            None if code == ResponseCode.SUCCESS else got.status.name,
            suggest,
            got.next_begin_offset,
            got.min_offset,
            got.max_offset,
            got.body() if got.count else None,
        )

    def commit_offset(self, header: PullMessageRequestHeader) -> None:
        """The consumer's offset the pull carries, kept (not on a slave: its master's are)."""
        if (
            header.sys_flag & FLAG_COMMIT_OFFSET
            and header.commit_offset >= 0
            and not self.store.is_slave
        ):
            self.offsets.commit(
                header.consumer_group, header.topic, header.queue_id, header.commit_offset
            )

    def _suggested_broker(self, header: PullMessageRequestHeader, got: GetResult) -> int:
        """With slaveReadEnable: the group's whichBrokerWhenConsumeSlowly when the pull reads
        further behind the CommitLog's end than accessMessageInMemoryMaxRatio of the machine's
        memory (cold data, likely off the page cache), else the group's brokerId."""
        group = self.groups.find(header.consumer_group)
        if group is None:
            return 0
        if got.count:
            # The last entry the pull read, as RocketMQ's maxPhyOffsetPulling.
            last = got.next_begin_offset - 1
            entry = self.store.queue_entry(header.topic, header.queue_id, last)
            if entry is not None:
                behind = self.store.max_phy_offset - entry.phy_offset
                ratio = self.store.config.access_message_in_memory_max_ratio
                if behind > PHYSICAL_MEMORY * ratio // 100:
                    return group.which_broker_when_consume_slowly
        return group.broker_id

    @staticmethod
    def _code(got: GetResult, requested: int) -> ResponseCode:
        if got.status in (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE):
            return ResponseCode.PULL_OFFSET_MOVED if requested != 0 else ResponseCode.PULL_NOT_FOUND
        return _CODES[got.status]

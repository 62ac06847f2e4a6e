"""The one check-and-route step of a send: what the store gets, or the refusal raised.

    routed = router.route_now(request, born, remote)   # None: it must wait (see below)
    routed = await router.route(request, born, remote)
    request, item, wait, queue_id = routed               # a plain tuple (Routed)
    appended = store.append_many([item])

In order, as RocketMQ's SendMessageProcessor: msgCheck (check.py: the broker's write
permission for order topics, the topic's name, forbidden topics, auto-creation, the queue id),
the topic's write permission, the queue (a random one for queueId < 0), then for a single send
retry -> DLQ at maxReconsumeTimes, the timer topic (TIMER_* properties), the schedule topic
(DELAY), the transaction half (refused under rejectTransactionMessage), and WAIT stripped from
a plain message; for a batch, its body decoded (a timer batch diverted message by message).
Every stored message ends with the CLUSTER property. The CommitLog's limits are checked here so
a send the store cannot take is refused with its remark before anything is appended.

`route_now` opens with the shortcut for the plain case (an existing writable topic and queue,
no property that asks for more, numbers in range): it builds what the full checks would build,
without them. `route_now` is the whole step without waiting; it gives None only where the step must
wait for the name servers to hear of a topic it makes (a topic auto-created, a %DLQ% one), or
for a request read by a fast decoder that did not read what the full checks need.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import NoReturn

from sidewinder.broker.config import PERM_WRITE, BrokerConfig
from sidewinder.broker.groups import SubscriptionGroups
from sidewinder.broker.schedule import schedule_for_delay
from sidewinder.broker.send.body import (
    MessageIllegal,
    decode_batch,
    strip_wait,
    unavailable,
    waits,
)
from sidewinder.broker.send.check import FAQ, check_topic, msg_check, plain_topic_name
from sidewinder.broker.send.request import SendRequest
from sidewinder.broker.timer import TIMER_MARK, TimerRefusal, TimerSettings, timer_for_send
from sidewinder.broker.topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    TIMER_TOPIC,
    TopicConfig,
    TopicTable,
)
from sidewinder.broker.transactions import to_half
from sidewinder.protocol.batch_record import BatchToStore, batch_to_store
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.errors import NoPermission, ServiceNotAvailable, SidewinderError
from sidewinder.protocol.message import MessageConst, without_property
from sidewinder.protocol.record import (
    END_FILE_MIN_BLANK_LENGTH,
    MAX_PROPERTIES_LENGTH,
    TRANSACTION_TYPE_MASK,
    Host,
    MessageToStore,
)
from sidewinder.store.commit_log import RECORD_ALLOWANCE
from sidewinder.store.message_store import MessageRun, MessageStore

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
Item = MessageToStore | BatchToStore | MessageRun


# What the route step made of one send: the request, what the store gets, whether its producer
# waits for it to be settled, and the queue id its reply names (the one it asked for or was
# given, before any diversion). A plain tuple, not a NamedTuple: the fast path makes one per
# message, and a tuple display costs a third of a NamedTuple's tuple.__new__.
Routed = tuple[SendRequest, Item, bool, int]


class SendRouter:
    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicTable,
        groups: SubscriptionGroups,
        store_host: Host,
        max_delay_level: int = 0,
        timer: TimerSettings | None = None,
        topics_changed: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.groups = groups
        self.store_host = store_host
        self.max_delay_level = max_delay_level
        self.timer = timer  # None: timer properties are left alone, as RocketMQ 4 does
        # Persist topics and tell the name servers, returning once they know (the app's).
        self.topics_changed = topics_changed or _nothing_to_tell
        self.cluster_property = f"{MessageConst.CLUSTER}\x01{config.broker_cluster_name}".encode()
        self._cluster_tail = b"\x02" + self.cluster_property
        # Topic names the fast path may send to: name -> its bytes, or b"" for one it may not.
        self._plain_names: dict[str, bytes] = {}

    # -- the step ----------------------------------------------------------------------------------
    def route_now(
        self, request: SendRequest, born: Host, remote: str, largest: int | None = None
    ) -> Routed | None:
        """The step without waiting: what to store, the refusal raised, or None when it must
        wait (a topic to make and tell the name servers of) or needs the full decode.
        `largest`: `fast_limit()`, worked out once for a chunk of sends.

        First the shortcut for a plain send: an existing writable topic and queue, a plain
        name, numbers that fit, no property that asks for more (inline: it runs per message)."""
        # Unpacked at once: a field read by name costs a descriptor call each, and a tuple
        # subclass unpacks fastest through a slice (an exact tuple).
        (_, _, _, name, queue_id, sys_flag, born_ts, msg_flag, reconsume, properties, _, body,
         batch) = request[:13]  # fmt: skip
        topic = self.topics.topics.get(name)
        topic_bytes = self._plain_names.get(name)
        if topic_bytes is None:
            topic_bytes = self._plain_name(name)
        if (
            topic_bytes
            and topic is not None
            and topic.perm & PERM_WRITE
            and queue_id >= 0
            and (queue_id < topic.write_queue_nums or queue_id < topic.read_queue_nums)
            and not sys_flag & TRANSACTION_TYPE_MASK
            and INT32_MIN <= sys_flag <= INT32_MAX
            and INT32_MIN <= msg_flag <= INT32_MAX
            and INT32_MIN <= reconsume <= INT32_MAX
            and INT64_MIN <= born_ts <= INT64_MAX
            and "DELAY\x01" not in properties
            and "TIMER_DEL" not in properties
            and "TRAN_MSG\x01" not in properties
        ):
            if largest is None:
                largest = self.fast_limit()
            if batch:
                routed = self._fast_batch(request, topic_bytes, born, largest)
                if routed is not None:
                    return routed
            else:
                properties, wait = strip_wait(properties)
                encoded = properties.encode("utf-8", "surrogateescape").rstrip(b"\x02")
                message = MessageToStore(
                    topic_bytes,
                    queue_id,
                    body,
                    encoded + self._cluster_tail if encoded else self.cluster_property,
                    msg_flag,
                    sys_flag,
                    born_ts,
                    born,
                    self.store_host,
                    reconsume,
                )
                # The numbers fit and a plain name is at most 127 ASCII characters: what is
                # left of CommitLog.illegal is the sizes.
                # A body within the record limit less the header allowance is within
                # maxMessageSize (a segment smaller than that only sends more the long way).
                if (
                    message.record_size <= largest
                    and len(body) <= largest - RECORD_ALLOWANCE
                    and len(message.properties) <= MAX_PROPERTIES_LENGTH
                ):
                    return (request, message, wait, queue_id)
        if not request.complete:
            return None
        checked = check_topic(self.config, self.topics, request, remote)
        if checked is None:
            return None
        return self._checked(request, checked, born, may_create=False)

    def lane_topic(self, name: str) -> tuple[str, bytes, int] | None:
        """For the send lane: a topic the shortcut may send to, as (name, encoded name, queue
        count: a queue id below it is taken), else None."""
        topic = self.topics.topics.get(name)
        if topic is None or not topic.perm & PERM_WRITE:
            return None
        encoded = self._plain_names.get(name)
        if encoded is None:
            encoded = self._plain_name(name)
        if not encoded:
            return None
        return (name, encoded, max(topic.write_queue_nums, topic.read_queue_nums))

    def fast_limit(self) -> int:
        """The largest record the fast path takes: the CommitLog's limit, or -1 (none) while
        the broker is not writable (msgCheck's rule for order topics is then to be applied)."""
        if not self.config.broker_permission & PERM_WRITE:
            return -1
        return self.store.largest_record()

    async def route(self, request: SendRequest, born: Host, remote: str) -> Routed:
        """The whole step, topics made (and the name servers told) where it needs to."""
        routed = self.route_now(request, born, remote)
        if routed is not None:
            return routed
        topic = await msg_check(self.config, self.topics, request, remote, self.topics_changed)
        known_topics = len(self.topics.topics)
        routed = self._checked(request, topic, born, may_create=True)
        assert routed is not None
        if len(self.topics.topics) != known_topics:
            await self.topics_changed()  # a %DLQ% topic made for this send
        return routed

    def _checked(
        self, request: SendRequest, topic: TopicConfig, born: Host, *, may_create: bool
    ) -> Routed | None:
        """Past msgCheck: the write permission, the queue, then the message(s) to store (None:
        a %DLQ% topic to make, which `may_create` does not allow)."""
        if not topic.perm & PERM_WRITE:
            raise NoPermission(f"the topic[{request.topic}] sending message is forbidden")
        queue_id = request.queue_id
        if queue_id < 0:
            queue_id = random.randrange(max(topic.write_queue_nums, 1))
        if request.batch:
            return self._batch(request, queue_id, born)
        return self._single(request, queue_id, born, may_create)

    def _single(
        self, request: SendRequest, queue_id: int, born: Host, may_create: bool
    ) -> Routed | None:
        """A half, a timed, a delayed or a plain message (into %DLQ% at max reconsume)."""
        topic, stored_queue = request.topic, queue_id
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # RocketMQ 4.9 does this for no batch
            group = self._dead_letter_at_max(request)
            if group is not None:
                dlq = f"{DLQ_GROUP_TOPIC_PREFIX}{group}"
                if self.topics.get(dlq) is None and not may_create:
                    return None  # to be made, and the name servers told, before it is stored
                topic, stored_queue = self.topics.create_dlq_topic(group).topic_name, 0
        entry = (request.msg_flag, request.body, request.properties.encode())
        message = self._messages(request, topic, stored_queue, (entry,), born)[0]
        wait = waits(entry[2])  # what the producer asked for, whatever is stored
        if "TRAN_MSG\x01true" in request.properties:
            if self.config.reject_transaction_message:
                raise NoPermission(
                    f"the broker[{self.config.broker_ip1}] sending transaction message is forbidden"
                )
            message = to_half(message)
        else:
            message = self._timed(message)
            if message.topic_name != TIMER_TOPIC:  # diverted keeps WAIT, as a delayed one does
                message = self._delayed_or_plain(message)
        problem = self.store.illegal(message)
        if problem:
            self._refuse_illegal(problem)
        return (request, message, wait, queue_id)

    def _batch(self, request: SendRequest, queue_id: int, born: Host) -> Routed:
        max_body = self.store.max_message_size
        if len(request.body) > max_body:
            # RocketMQ 5 counts a batch's body, as it counts a message's, against maxMessageSize.
            self._refuse_illegal(
                f"batch body of {len(request.body)} bytes is larger than maxMessageSize {max_body}"
            )
        entries = decode_batch(request.body)
        if not entries:
            raise MessageIllegal("the batch is empty")
        messages = self._timed_batch(
            self._messages(request, request.topic, queue_id, entries, born)
        )
        total = 0
        for message in messages:
            problem = self.store.illegal(message)
            if problem:
                self._refuse_illegal(problem)
            total += message.record_size
        if len(messages) > 1:
            self._check_batch_size(total)
        diverted = messages[0].topic_name == TIMER_TOPIC
        batch: BatchToStore | MessageRun
        if diverted or request.sys_flag & TRANSACTION_TYPE_MASK:
            batch = MessageRun(messages)
        else:
            shared = self._shared(request, request.topic.encode(), queue_id, born)
            found = batch_to_store(request.body, shared, self.cluster_property)
            assert found is not None, "a body decode_batch reads and the CommitLog takes"
            batch = found
        return (request, batch, waits(messages[0].properties), queue_id)

    def _check_batch_size(self, total: int) -> None:
        """CommitLog's rule for a batch: all its records in one segment, within the largest
        record (maxMessageSize and the allowance for headers)."""
        problem = self.store.illegal_batch(total)
        if problem:
            self._refuse_illegal(problem)
        largest = self.store.largest_record()
        if total > largest:
            self._refuse_illegal(
                f"batch of {total} bytes cannot fit a mappedFileSizeCommitLog "
                f"{largest + END_FILE_MIN_BLANK_LENGTH} segment"
            )

    def _refuse_illegal(self, problem: str) -> NoReturn:
        """A message the CommitLog cannot take, refused as RocketMQ's putMessage refuses it: a
        store that takes no writes says so first (SERVICE_NOT_AVAILABLE), else MESSAGE_ILLEGAL;
        either counts in putMessageFailedTimes."""
        self.store.stats.put_failed_times += 1
        failure = self.store.write_failure()
        if failure:
            raise ServiceNotAvailable(unavailable(failure))
        raise MessageIllegal(problem)

    # -- the fast path -----------------------------------------------------------------------------
    def _fast_batch(
        self, request: SendRequest, topic_bytes: bytes, born: Host, largest: int
    ) -> Routed | None:
        """A plain batch as the full step would store it, sized but not built (its records are
        written in one go by the append); None for a body the full step refuses or diverts."""
        body = request.body
        # A timer message's properties are its own, in the body (a match is only slower).
        if b"TIMER_DEL" in body or len(body) > largest - RECORD_ALLOWANCE:
            return None
        shared = self._shared(request, topic_bytes, request.queue_id, born)
        batch = batch_to_store(body, shared, self.cluster_property)
        if batch is None or batch.record_size > largest:
            return None
        return (request, batch, waits(batch.first_properties()), request.queue_id)

    def _plain_name(self, name: str) -> bytes:
        if len(self._plain_names) > 100_000:
            self._plain_names.clear()
        encoded = name.encode() if plain_topic_name(name) else b""
        self._plain_names[name] = encoded
        return encoded

    # -- building messages -------------------------------------------------------------------------
    def _shared(
        self, request: SendRequest, topic: bytes, queue_id: int, born: Host
    ) -> MessageToStore:
        """The header's fields every message of a batch shares (no body, no properties)."""
        return MessageToStore(
            topic,
            queue_id,
            b"",
            b"",
            0,
            request.sys_flag,
            request.born_timestamp,
            born,
            self.store_host,
            request.reconsume_times,
        )

    def _messages(
        self,
        request: SendRequest,
        topic: str,
        queue_id: int,
        entries: Sequence[tuple[int, bytes, bytes]],
        born: Host,
    ) -> list[MessageToStore]:
        """What is stored of each (flag, body, properties), the header's fields shared."""
        topic_bytes, store_host = topic.encode(), self.store_host
        sys_flag, born_ts = request.sys_flag, request.born_timestamp
        reconsume, with_cluster = request.reconsume_times, self.with_cluster
        return [
            MessageToStore(
                topic_bytes,
                queue_id,
                body,
                with_cluster(properties),
                flag,
                sys_flag,
                born_ts,
                born,
                store_host,
                reconsume,
            )
            for flag, body, properties in entries
        ]

    def with_cluster(self, properties: bytes) -> bytes:
        """Add the CLUSTER property; like RocketMQ 4.9's messageProperties2String, no trailing
        separator (ali-ons reads an empty property from one)."""
        properties = properties.rstrip(b"\x02")
        if not properties:
            return self.cluster_property
        return properties + self._cluster_tail

    def _dead_letter_at_max(self, request: SendRequest) -> str | None:
        """A send to %RETRY%group (a consumer's fallback when CONSUMER_SEND_MSG_BACK failed)
        that has been consumed maxReconsumeTimes goes to %DLQ%group instead: the group, None to
        keep the retry topic; the refusal raised (handleRetryAndDLQ)."""
        group_name = request.topic.removeprefix(RETRY_GROUP_TOPIC_PREFIX)
        group = self.groups.find(group_name)
        if group is None:
            raise SidewinderError(
                f"subscription group not exist, {group_name} {FAQ}",
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
            )
        max_times = request.max_reconsume_times
        if max_times is None:
            max_times = group.retry_max_times
        if request.reconsume_times < max_times:
            return None
        return group_name

    def _timed(self, message: MessageToStore) -> MessageToStore:
        """Into the timer topic when TIMER_* properties ask for a later time (RocketMQ 5's
        handleScheduleMessage hook), or the refusal raised."""
        if self.timer is None or TIMER_MARK not in message.properties:
            return message
        timed = timer_for_send(message, self.timer, int(time.time() * 1000))
        if isinstance(timed, TimerRefusal):
            raise SidewinderError(timed.remark, timed.code)
        return timed

    def _timed_batch(self, messages: list[MessageToStore]) -> list[MessageToStore]:
        """A batch's messages that ask for a time, each into the timer topic with its own.
        RocketMQ 5 reads only the batch's own properties (which a Java client leaves without
        them) and stores the messages as they are; a batch being one topic and queue, one
        that mixes timer messages with others is refused."""
        if self.timer is None or not any(TIMER_MARK in m.properties for m in messages):
            return messages
        now_ms = int(time.time() * 1000)
        diverted = []
        for message in messages:
            timed = timer_for_send(message, self.timer, now_ms, divert_due=True)
            if isinstance(timed, TimerRefusal):
                raise SidewinderError(timed.remark, timed.code)
            diverted.append(timed)
        into_timer = [m.topic_name == TIMER_TOPIC for m in diverted]
        if any(into_timer) and not all(into_timer):
            raise MessageIllegal("a batch mixes timer messages with others; send them apart")
        return diverted

    def _delayed_or_plain(self, message: MessageToStore) -> MessageToStore:
        """Into the schedule topic when DELAY asks for it; a plain message is stored without
        the WAIT property, as RocketMQ 4.9 stores it (a delayed one keeps it: CommitLog
        rebuilds the properties from the map the send processor had put WAIT back into)."""
        if self.max_delay_level:
            scheduled = schedule_for_delay(message, self.max_delay_level)
            if scheduled is not message:
                return scheduled
        properties = without_property(message.properties, MessageConst.WAIT_STORE_MSG_OK)
        if properties is message.properties:
            return message
        return replace(message, properties=properties)


async def _nothing_to_tell() -> None:
    """topics_changed for a router with no app around it (tests)."""

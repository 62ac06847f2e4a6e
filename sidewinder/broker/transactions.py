"""Transactional messages (RocketMQ 4.x's TransactionalMessageService, simplified to one queue).

A half message is stored in RMQ_SYS_TRANS_HALF_TOPIC (its real topic and queue in properties)
and stays invisible. END_TRANSACTION commits it (the real message is put, sysFlag COMMIT) or
rolls it back; either way an op record for its half offset goes to RMQ_SYS_TRANS_OP_HALF_TOPIC,
so a restart knows it is settled. Half messages left unsettled past transactionTimeOut are
checked as RocketMQ checks them: the half is put again with TRANSACTION_CHECK_TIMES counted up
(the copy supersedes it), and CHECK_TRANSACTION_STATE about the copy goes to a live producer of
its group; a half checked transactionCheckMax times is discarded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import replace

import structlog

from sidewinder.broker.clients import Clients
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.topics import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TopicConfig, TopicTable
from sidewinder.common.service import cancel_and_wait
from sidewinder.protocol.codes import RequestCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import CheckTransactionStateRequestHeader
from sidewinder.protocol.message import (
    MessageConst,
    decode_properties,
    encode_offset_msg_id,
    encode_properties,
    property_value,
)
from sidewinder.protocol.record import (
    TRANSACTION_TYPE_MASK,
    MessageRecord,
    MessageToStore,
    encode_record,
    message_from_record,
)
from sidewinder.remoting.connection import Connection
from sidewinder.store.message_store import MessageStore, PutResult, PutStatus

log = structlog.get_logger(__name__)

PREPARED, COMMIT, ROLLBACK = 0x4, 0x8, 0xC
REMOVE_TAG = "d"
# What RocketMQ 4.9 stores on an op record: the TAGS and the WAIT=true of the Message it builds
# (its WAIT=false comes after the stored properties were made).
OP_PROPERTIES = encode_properties(
    {MessageConst.TAGS: REMOVE_TAG, MessageConst.WAIT_STORE_MSG_OK: "true"}, trailing=False
)


def to_half(message: MessageToStore) -> MessageToStore:
    """The half message of a transactional send (parseHalfMessageInner)."""
    props = decode_properties(message.properties)
    props[MessageConst.REAL_TOPIC] = message.topic_name
    props[MessageConst.REAL_QUEUE_ID] = str(message.queue_id)
    return replace(
        message,
        topic=TRANS_HALF_TOPIC.encode(),
        queue_id=0,
        sys_flag=message.sys_flag & ~0xC,
        properties=encode_properties(props, trailing=False),
    )


def _identity(half: MessageRecord) -> object:
    """What a half and its checked copies share: the client's message id (or, without one, its
    birth and body)."""
    uniq = property_value(half.properties_bytes, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    return uniq or (half.born_host, half.born_timestamp, half.body_crc)


def committed_message(half: MessageRecord) -> MessageToStore:
    """The real message of a committed half (EndTransactionProcessor.endMessageTransaction): in
    REAL_TOPIC / REAL_QID, type COMMIT, pointing at the half, with the half's properties as
    they are. RocketMQ clears TRAN_MSG, REAL_TOPIC and REAL_QID only in the map, after it built
    the stored properties: consumers of a committed message see all three."""
    props = half.properties()
    return message_from_record(
        half,
        topic=props.get(MessageConst.REAL_TOPIC, half.topic),
        queue_id=int(props.get(MessageConst.REAL_QUEUE_ID, "0")),
        properties=bytes(half.properties_bytes),
        sys_flag=(half.sys_flag & ~TRANSACTION_TYPE_MASK) | COMMIT,
        prepared_transaction_offset=half.phy_offset,
    )


class Transactions:
    def __init__(
        self, config: BrokerConfig, store: MessageStore, topics: TopicTable, clients: Clients
    ) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.clients = clients
        # Half queue offsets done with: settled by an op record, or superseded by a checked copy.
        self.settled: set[int] = set()
        self.copies: dict[int, int] = {}  # superseded half queue offset -> its copy's phy offset
        self.scan_from = 0
        self._task: asyncio.Task[None] | None = None

    def ensure_topics(self) -> None:
        for name in (TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC):
            if self.topics.get(name) is None:
                self.topics.upsert(TopicConfig(name, 1, 1))

    def load(self) -> None:
        """Rebuild the settled set (at start): halves named by an op record, and halves a later
        checked copy of the same message superseded."""
        for record in self._queue_records(TRANS_OP_HALF_TOPIC):
            try:
                self.settled.add(int(bytes(record.body)))
            except ValueError:
                continue
        latest: dict[object, int] = {}
        for half in self._queue_records(TRANS_HALF_TOPIC):
            earlier = latest.get(_identity(half))
            if earlier is not None:
                self.settled.add(earlier)
                self.copies[earlier] = half.phy_offset
            latest[_identity(half)] = half.queue_offset

    def _queue_records(self, topic: str) -> Iterator[MessageRecord]:
        store = self.store
        for offset in range(
            store.min_offset_in_queue(topic, 0), store.max_offset_in_queue(topic, 0)
        ):
            entry = store.queue_entry(topic, 0, offset)
            record = self.store.lookup_message_by_offset(entry.phy_offset) if entry else None
            if record is not None:
                yield record

    async def settle(self, half: MessageRecord, commit: bool) -> PutResult | None:
        """Commit (put the real message) or roll back a half message; record the op."""
        result = None
        if commit:
            result = await self.store.put_message(committed_message(half))
        op = MessageToStore(
            topic=TRANS_OP_HALF_TOPIC.encode(),
            queue_id=0,
            body=str(half.queue_offset).encode(),
            properties=OP_PROPERTIES,
            store_host=half.store_host,
            born_host=half.store_host,
            born_timestamp=int(time.time() * 1000),
        )
        await self.store.put_message(op)
        self.settled.add(half.queue_offset)
        return result

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._check_loop())

    async def stop(self) -> None:
        await cancel_and_wait([self._task])

    async def _check_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.transaction_check_interval / 1000)
            try:
                await self.check_once()
            except Exception as exc:  # keep checking; say why this round failed
                log.warning("transactions.check_failed", error=repr(exc))

    async def check_once(self) -> None:
        store = self.store
        max_offset = store.max_offset_in_queue(TRANS_HALF_TOPIC, 0)
        if max_offset == 0:
            return  # no half message yet
        now_ms = int(time.time() * 1000)
        timeout = self.config.transaction_time_out
        offset = max(self.scan_from, store.min_offset_in_queue(TRANS_HALF_TOPIC, 0))
        while offset < max_offset and offset in self.settled:
            offset += 1
        self.scan_from = offset
        for half_offset in range(offset, max_offset):
            if half_offset in self.settled:
                continue
            entry = store.queue_entry(TRANS_HALF_TOPIC, 0, half_offset)
            record = self.store.lookup_message_by_offset(entry.phy_offset) if entry else None
            if record is None:
                continue
            props = record.properties()
            immunity = props.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
            wait = int(immunity) * 1000 if immunity and immunity.isdigit() else timeout
            if now_ms - record.store_timestamp < wait:
                break  # later ones are younger still
            checked = int(props.get(MessageConst.TRANSACTION_CHECK_TIMES, "0") or 0)
            if checked >= self.config.transaction_check_max:
                log.info("transactions.discarded", half_offset=half_offset, checks=checked)
                await self.settle(record, commit=False)
                continue
            renewed = await self._renew(record, props, checked + 1)
            if renewed is not None:
                self._ask_producer(renewed, renewed.properties())

    async def _renew(
        self, half: MessageRecord, props: dict[str, str], checks: int
    ) -> MessageRecord | None:
        """Put the half again with its check count (putBackHalfMsgQueue); the copy is what the
        producer is asked about and what a commit then stores, TRANSACTION_CHECK_TIMES
        included. The original is done with."""
        props[MessageConst.TRANSACTION_CHECK_TIMES] = str(checks)
        copy = message_from_record(
            half,
            topic=TRANS_HALF_TOPIC,
            queue_id=0,
            properties=props,
            reconsume_times=0,
            prepared_transaction_offset=0,
        )
        result = await self.store.put_message(copy)
        if result.status is not PutStatus.PUT_OK or result.append is None:
            log.warning("transactions.renew_failed", half_offset=half.queue_offset)
            return None
        self.settled.add(half.queue_offset)
        self.copies[half.queue_offset] = result.append.phy_offset
        return self.store.lookup_message_by_offset(result.append.phy_offset)

    def current(self, half: MessageRecord) -> MessageRecord:
        """The latest checked copy of a half (itself when never checked): a producer's verdict
        on a half that was checked meanwhile settles the copy, so it is not asked about (and
        committed) again."""
        while (copy_at := self.copies.get(half.queue_offset)) is not None:
            copy = self.store.lookup_message_by_offset(copy_at)
            if copy is None:
                break
            half = copy
        return half

    def _ask_producer(self, record: MessageRecord, props: dict[str, str]) -> None:
        group = props.get(MessageConst.PRODUCER_GROUP, "")
        channels = [
            c.connection
            for c in (self.clients.producers.get(group) or {}).values()
            if isinstance(c.connection, Connection)
        ]
        if not channels:
            return  # counted all the same: with no producer back, it is discarded in the end
        uniq = props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        offset_msg_id = encode_offset_msg_id(
            record.store_host.address, record.store_host.port, record.phy_offset
        )
        header = CheckTransactionStateRequestHeader(
            record.queue_offset, record.phy_offset, uniq, uniq, offset_msg_id
        )
        request = RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE, header.to_ext(), self._check_body(record, props)
        )
        channels[0].invoke_oneway(request)

    @staticmethod
    def _check_body(record: MessageRecord, props: dict[str, str]) -> bytes:
        """The half message as MessageDecoder.encode writes it, with its real topic and queue."""
        real = message_from_record(
            record,
            topic=props.get(MessageConst.REAL_TOPIC, record.topic),
            queue_id=int(props.get(MessageConst.REAL_QUEUE_ID, "0")),
            properties=bytes(record.properties_bytes),
        )
        out = bytearray(real.record_size)
        encode_record(
            real,
            out,
            0,
            queue_offset=record.queue_offset,
            phy_offset=record.phy_offset,
            store_timestamp=record.store_timestamp,
        )
        return bytes(out)

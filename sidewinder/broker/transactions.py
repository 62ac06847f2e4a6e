"""Transactional messages (RocketMQ 4.x's TransactionalMessageService, simplified to one queue).

A half message is stored in RMQ_SYS_TRANS_HALF_TOPIC (its real topic and queue in properties)
and stays invisible. END_TRANSACTION commits it (the real message is put, sysFlag COMMIT) or
rolls it back; either way an op record for its half offset goes to RMQ_SYS_TRANS_OP_HALF_TOPIC,
so a restart knows it is settled. Half messages left unsettled past transactionTimeOut are
checked: CHECK_TRANSACTION_STATE goes to a live producer of their group, at most
transactionCheckMax times.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import structlog

from sidewinder.broker.clients import Clients
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.topics import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TopicConfig, TopicTable
from sidewinder.protocol.codes import RequestCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import CheckTransactionStateRequestHeader
from sidewinder.protocol.message import (
    MessageConst,
    decode_properties,
    encode_offset_msg_id,
    encode_properties,
)
from sidewinder.protocol.record import (
    TRANSACTION_TYPE_MASK,
    MessageRecord,
    MessageToStore,
    encode_record,
    message_from_record,
)
from sidewinder.remoting.connection import Connection
from sidewinder.store.message_store import MessageStore, PutResult

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
        self.settled: set[int] = set()  # half queue offsets with an op record
        self.checks: dict[int, int] = {}
        self.scan_from = 0
        self._task: asyncio.Task[None] | None = None

    def ensure_topics(self) -> None:
        for name in (TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC):
            if self.topics.get(name) is None:
                self.topics.upsert(TopicConfig(name, 1, 1))

    def load(self) -> None:
        """Rebuild the settled set from the op topic (at start)."""
        queue = self.store.queues.queues.get((TRANS_OP_HALF_TOPIC, 0))
        if queue is None:
            return
        for offset in range(queue.min_offset, queue.max_offset):
            entry = queue.entry(offset)
            record = self.store.lookup_message_by_offset(entry.phy_offset) if entry else None
            if record is not None:
                try:
                    self.settled.add(int(bytes(record.body)))
                except ValueError:
                    continue

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
        self.checks.pop(half.queue_offset, None)
        return result

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._check_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _check_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.transaction_check_interval / 1000)
            try:
                await self.check_once()
            except Exception as exc:  # keep checking; say why this round failed
                log.warning("transactions.check_failed", error=repr(exc))

    async def check_once(self) -> None:
        queue = self.store.queues.queues.get((TRANS_HALF_TOPIC, 0))
        if queue is None:
            return
        now_ms = int(time.time() * 1000)
        timeout = self.config.transaction_time_out
        offset = max(self.scan_from, queue.min_offset)
        while offset < queue.max_offset and offset in self.settled:
            offset += 1
        self.scan_from = offset
        for half_offset in range(offset, queue.max_offset):
            if half_offset in self.settled:
                continue
            entry = queue.entry(half_offset)
            record = self.store.lookup_message_by_offset(entry.phy_offset) if entry else None
            if record is None:
                continue
            props = record.properties()
            immunity = props.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
            wait = int(immunity) * 1000 if immunity and immunity.isdigit() else timeout
            if now_ms - record.store_timestamp < wait:
                break  # later ones are younger still
            checked = self.checks.get(half_offset, 0)
            if checked >= self.config.transaction_check_max:
                log.info("transactions.discarded", half_offset=half_offset, checks=checked)
                await self.settle(record, commit=False)
                continue
            if self._ask_producer(record, props):
                self.checks[half_offset] = checked + 1

    def _ask_producer(self, record: MessageRecord, props: dict[str, str]) -> bool:
        group = props.get(MessageConst.PRODUCER_GROUP, "")
        channels = [
            c.connection
            for c in (self.clients.producers.get(group) or {}).values()
            if isinstance(c.connection, Connection)
        ]
        if not channels:
            return False
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
        return True

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

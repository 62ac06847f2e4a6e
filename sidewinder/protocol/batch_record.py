"""The messages of one SEND_BATCH_MESSAGE body, stored as a run of CommitLog records.

    batch = batch_to_store(body, shared, cluster)   # None: a body the reference path refuses
    phys = encode_batch(batch, buffer, position, queue_offset=q, phy_offset=p, store_timestamp=t)

A batch body is a run of entries (RocketMQ's MessageDecoder.encodeMessages): TOTALSIZE 4,
MAGICCODE 4, BODYCRC 4, FLAG 4, BODYLENGTH 4 + BODY, PROPERTIESLENGTH 2 + PROPERTIES. Each
becomes one record: the send header's fields (`shared`, a MessageToStore with no body and no
properties) with the entry's flag and body, and its properties less their trailing separators,
ending with the broker's CLUSTER property. The records take consecutive queue offsets.

`BatchToStore` carries the whole batch through the CommitLog's append as one item: its size is
worked out once at intake, and its records are written by one call (natively when the extension
is loaded), not one MessageToStore and one encode per message. `batch_messages_py` builds the
MessageToStore of each message, the way SendProcessor's generic path stores them: it is the
reference that `encode_batch_py` encodes, and that tests compare the native encoder with.
"""

from __future__ import annotations

import struct
from typing import ClassVar

from sidewinder.common.native import NATIVE
from sidewinder.protocol.record import (
    MAX_PROPERTIES_LENGTH,
    TRANSACTION_TYPE_MASK,
    MessageSysFlag,
    MessageToStore,
    encode_record,
    encode_record_py,
)

# An entry's head: totalSize, magic, bodyCRC, flag, bodyLen (MAGICCODE and BODYCRC unchecked,
# as RocketMQ's broker leaves them).
_ENTRY = struct.Struct(">iiiii")
# Half and rolled-back transaction messages take no queue offset.
_UNCOUNTED = (int(MessageSysFlag.TRANSACTION_PREPARED), int(MessageSysFlag.TRANSACTION_ROLLBACK))


class BatchToStore:
    """A batch send for one (topic, queue): what the CommitLog's append asks of a
    MessageToStore (topic, queue, stored SYSFLAG, record bytes), for all its records at once."""

    __slots__ = (
        "cluster",
        "count",
        "data",
        "phys",
        "queue_id",
        "record_size",
        "records",
        "shared",
        "stored_sys_flag",
        "topic",
        "topic_name",
    )
    batch: ClassVar[bool] = True  # MessageToStore.batch is False

    def __init__(
        self, data: bytes, shared: MessageToStore, cluster: bytes, count: int, record_size: int
    ) -> None:
        self.data = data
        self.shared = shared
        self.cluster = cluster
        self.count = count
        self.record_size = record_size  # all the records' bytes
        self.topic = shared.topic
        self.topic_name = shared.topic_name
        self.queue_id = shared.queue_id
        self.stored_sys_flag = shared.stored_sys_flag
        self.phys: list[int] = []  # each record's physical offset, once appended
        # The messages themselves, when they were built one by one (batch_of_messages).
        self.records: list[MessageToStore] | None = None

    def first_properties(self) -> bytes:
        """The properties its first message is stored with (the store's rule for a batch's
        WAIT reads them)."""
        if self.records is not None:
            return self.records[0].properties
        data = self.data
        props_at = 20 + _ENTRY.unpack_from(data)[4]
        end = props_at + 2 + (data[props_at] << 8 | data[props_at + 1])
        kept = data[props_at + 2 : end].rstrip(b"\x02")
        return kept + b"\x02" + self.cluster if kept else self.cluster


def batch_to_store(data: bytes, shared: MessageToStore, cluster: bytes) -> BatchToStore | None:
    """The batch of body `data`, or None for a body the generic path refuses (a torn or
    overlong entry, properties too long once the CLUSTER one is added) or finds empty."""
    native = _native_batch_sizes
    sized = batch_sizes_py(data, len(cluster)) if native is None else native(data, len(cluster))
    if sized is None:
        return None
    count, variable = sized
    return BatchToStore(data, shared, cluster, count, count * shared.record_size + variable)


def batch_of_messages(messages: list[MessageToStore]) -> BatchToStore:
    """A batch of messages built one by one (of one topic and queue, sharing their header's
    fields): a batch whose messages a send diverted each on its own (into the timer topic), or
    a transactional one. Appended as one item, its records stay in one segment."""
    first = messages[0]
    size = sum(message.record_size for message in messages)
    batch = BatchToStore(b"", first, b"", len(messages), size)
    batch.records = messages
    return batch


def batch_sizes_py(data: bytes, cluster_length: int) -> tuple[int, int] | None:
    """How many messages the body holds, and their bodies' and stored properties' bytes
    together (what their records add to the fixed part); None as batch_to_store says."""
    count = variable = at = 0
    length = len(data)
    entry = _ENTRY.unpack_from
    while at < length:
        if at + 20 > length:
            return None
        total, _, _, _, body_len = entry(data, at)
        props_at = at + 20 + body_len  # where the properties' length is
        if body_len < 0 or props_at + 2 > length:
            return None
        props_len = data[props_at] << 8 | data[props_at + 1]  # a negative short: > 0x7FFF
        end = props_at + 2 + props_len
        if props_len > 0x7FFF or end > length or (total and at + total != end):
            return None
        kept = len(data[props_at + 2 : end].rstrip(b"\x02"))
        stored = kept + 1 + cluster_length if kept else cluster_length
        if stored > MAX_PROPERTIES_LENGTH:
            return None
        count += 1
        variable += body_len + stored
        at = end
    return (count, variable) if count else None


def batch_messages_py(batch: BatchToStore) -> list[MessageToStore]:
    """Each message of the batch as the generic path stores it (the reference)."""
    data, shared, cluster = batch.data, batch.shared, batch.cluster
    messages: list[MessageToStore] = []
    at = 0
    while at < len(data):
        _, _, _, flag, body_len = _ENTRY.unpack_from(data, at)
        props_at = at + 20 + body_len
        end = props_at + 2 + (data[props_at] << 8 | data[props_at + 1])
        properties = data[props_at + 2 : end].rstrip(b"\x02")
        messages.append(
            MessageToStore(
                shared.topic,
                shared.queue_id,
                data[at + 20 : props_at],
                properties + b"\x02" + cluster if properties else cluster,
                flag,
                shared.sys_flag,
                shared.born_timestamp,
                shared.born_host,
                shared.store_host,
                shared.reconsume_times,
                shared.prepared_transaction_offset,
            )
        )
        at = end
    return messages


def encode_batch_py(
    batch: BatchToStore,
    buffer: bytearray | memoryview,
    position: int,
    *,
    queue_offset: int,
    phy_offset: int,
    store_timestamp: int,
) -> list[int]:
    """Write the batch's records into `buffer` from `position` (the caller checked the room);
    returns each record's physical offset."""
    phys: list[int] = []
    at = 0
    for n, message in enumerate(batch_messages_py(batch)):
        phys.append(phy_offset + at)
        at += encode_record_py(
            message,
            buffer,
            position + at,
            queue_offset=queue_offset + n,
            phy_offset=phy_offset + at,
            store_timestamp=store_timestamp,
        )
    return phys


def encode_batch(
    batch: BatchToStore,
    buffer: bytearray | memoryview,
    position: int,
    *,
    queue_offset: int,
    phy_offset: int,
    store_timestamp: int,
) -> list[int]:
    """encode_batch_py's records, byte for byte; natively in one call when the extension is
    loaded (which also refuses, before writing anything, a buffer without room: IndexError).
    A batch of built messages is written record by record; half and rolled-back transaction
    messages take no queue offset (0), as CommitLog.doAppend writes them."""
    if batch.records is not None:
        return _encode_records(
            batch.records, buffer, position, queue_offset, phy_offset, store_timestamp
        )
    native = _native_encode_batch
    if native is None:
        return encode_batch_py(
            batch,
            buffer,
            position,
            queue_offset=queue_offset,
            phy_offset=phy_offset,
            store_timestamp=store_timestamp,
        )
    shared = batch.shared
    born, store = shared.born_host, shared.store_host
    return native(
        buffer,
        position,
        batch.data,
        batch.cluster,
        batch.record_size,
        shared.topic,
        shared.queue_id,
        shared.stored_sys_flag,
        shared.born_timestamp,
        born.address,
        born.port,
        store_timestamp,
        store.address,
        store.port,
        shared.reconsume_times,
        shared.prepared_transaction_offset,
        queue_offset,
        phy_offset,
    )


def _encode_records(
    records: list[MessageToStore],
    buffer: bytearray | memoryview,
    position: int,
    queue_offset: int,
    phy_offset: int,
    store_timestamp: int,
) -> list[int]:
    counted = records[0].stored_sys_flag & TRANSACTION_TYPE_MASK not in _UNCOUNTED
    phys: list[int] = []
    at = 0
    for n, message in enumerate(records):
        phys.append(phy_offset + at)
        at += encode_record(
            message,
            buffer,
            position + at,
            queue_offset=queue_offset + n if counted else 0,
            phy_offset=phy_offset + at,
            store_timestamp=store_timestamp,
        )
    return phys


_native_batch_sizes = None if NATIVE is None else NATIVE.batch_sizes
_native_encode_batch = None if NATIVE is None else NATIVE.encode_batch

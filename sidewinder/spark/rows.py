"""The read schema both data sources share, and Arrow record batches built in that schema.

    schema = read_schema(include_properties=True)
    batch = arrow_batch(schema, messages)        # pulled ReceivedMessages -> pyarrow.RecordBatch

Rows go to Spark as Arrow batches built column by column (about twice as fast as tuples, which
Spark converts one value at a time). The batch's Arrow schema must equal the one Spark derives
from the Spark schema, nullability included, so it is derived the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sidewinder.client.pulling import ReceivedMessage
from sidewinder.protocol.message import MessageConst

ROWS_PER_ARROW_BATCH = 4096  # rows a task hands Spark at a time

# msgId is the broker's id (store host + CommitLog offset, what queryMsgById takes); uniqKey is
# the producer's UNIQ_KEY, which the Java client's MessageExt.getMsgId() shows when present.
# keys is the KEYS property as stored: keys separated by spaces.
# (Built from types, not DDL: parsing DDL needs a SparkContext, which Python workers lack.)
_COLUMNS: list[tuple[str, DataType]] = [
    ("topic", StringType()),
    ("brokerName", StringType()),
    ("queueId", IntegerType()),
    ("queueOffset", LongType()),
    ("commitLogOffset", LongType()),
    ("msgId", StringType()),
    ("uniqKey", StringType()),
    ("keys", StringType()),
    ("tags", StringType()),
    ("properties", MapType(StringType(), StringType())),
    ("body", BinaryType()),
    ("bornTimestamp", TimestampType()),
    ("storeTimestamp", TimestampType()),
    ("bornHost", StringType()),
    ("storeHost", StringType()),
    ("reconsumeTimes", IntegerType()),
    ("sysFlag", IntegerType()),
]


def read_schema(*, include_properties: bool = True) -> StructType:
    return StructType(
        [
            StructField(name, kind)
            for name, kind in _COLUMNS
            if include_properties or name != "properties"
        ]
    )


def arrow_schema(schema: StructType) -> pa.Schema:
    return to_arrow_schema(schema, timezone="UTC")


def arrow_batch(
    schema: pa.Schema, broker_name: str | None, messages: Sequence[ReceivedMessage]
) -> pa.RecordBatch:
    """One record batch of messages of one queue (all share `broker_name` and the topic)."""
    props = [m.properties for m in messages]
    values: dict[str, list[object] | pa.Array] = {
        "topic": [m.queue.topic for m in messages],
        "brokerName": [broker_name] * len(messages),
        "queueId": [m.queue.queue_id for m in messages],
        "queueOffset": [m.queue_offset for m in messages],
        "commitLogOffset": [m.commit_log_offset for m in messages],
        "msgId": [m.offset_msg_id for m in messages],
        "uniqKey": [p.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) for p in props],
        "keys": [p.get(MessageConst.KEYS) for p in props],
        "tags": [p.get(MessageConst.TAGS) for p in props],
        "properties": [list(p.items()) for p in props],
        "body": [m.body for m in messages],
        "bornTimestamp": [m.born_timestamp * 1000 for m in messages],
        "storeTimestamp": [m.store_timestamp * 1000 for m in messages],
        "bornHost": [m.born_host for m in messages],
        "storeHost": [m.store_host for m in messages],
        "reconsumeTimes": [m.reconsume_times for m in messages],
        "sysFlag": [m.sys_flag for m in messages],
    }
    arrays = [pa.array(values[field.name], type=field.type) for field in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)

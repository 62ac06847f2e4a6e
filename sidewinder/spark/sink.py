"""`format("rocketmq")` as a sink: batch `df.write` and `writeStream`, append only.

    (df.selectExpr("CAST(id AS STRING) AS keys", "payload AS body")
       .write.format("rocketmq").option("namesrvAddr", "127.0.0.1:9876")
       .option("topic", "Orders").mode("append").save())

Columns: `body` (binary or string, required); optional `topic` (the `topic` option wins over
it), `tags`, `keys` (string, space separated, or array<string>), `properties`
(map<string,string>), `queueId`, `delayTimeLevel`. Routing (`queueSelector`): `column` (the
`queueId` column), `hash` (Java hash of the keys: one key, one queue, its order kept), or
`roundrobin`; the default is the first of those whose column is there.

Exactly once (`exactlyOnce`, default true). Spark's sink is at-least-once: when a batch's
commit fails, or a task dies half way, its tasks run again over the same rows. Each task is
named by (query id, batch id, partition id) and each of its messages gets a UNIQ_KEY derived
from that name and the row (its content and how often that content came before in the task),
so a replay produces the same ids. Around the sends a task writes two markers to the sink log
topic (`sinkLogTopic`), keyed in the broker's index by the task's name: *started* before its
first send, *done* after its last acknowledgement. A task that finds *done* sends nothing; one
that finds *started* but not *done* looks each of its ids up in the target topic's key index
(QUERY_MESSAGE by UNIQ_KEY) and sends only the missing. This relies on a replayed task seeing
the same rows, as Spark's replay of a deterministic source (this one, Kafka, files) and
deterministic transformations gives; messages are visible as soon as tasks write them, before
Spark commits the batch.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from sidewinder.client.producer import Message
from sidewinder.client.route_cache import MessageQueue
from sidewinder.protocol.acl import Credentials
from sidewinder.protocol.message import MessageConst, java_string_hash
from sidewinder.remoting.tls import TlsConfig
from sidewinder.spark.cluster import Cluster, shared_cluster
from sidewinder.spark.options import OptionError, acl_credentials, client_tls

SINK_LOG_TOPIC = "SIDEWINDER_SPARK_SINK_LOG"
SELECTORS = ("column", "hash", "roundrobin")
WRITE_COLUMNS = {"body", "topic", "tags", "keys", "properties", "queueId", "delayTimeLevel"}
UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX


@dataclass(frozen=True)
class WriteOptions:
    namesrv_addr: str
    topic: str | None
    selector: str
    exactly_once: bool
    sink_log_topic: str
    credentials: Credentials | None = None  # accessKey / secretKey: ACL signatures
    tls: TlsConfig | None = None  # tls=true and the tls.* client keys

    @classmethod
    def parse(cls, options: Mapping[str, str], schema: StructType) -> WriteOptions:
        given = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
        namesrv = given.get("namesrvaddr", "").strip()
        if not namesrv:
            raise OptionError("namesrvAddr", "is required")
        columns = set(schema.fieldNames())
        if "body" not in columns:
            raise OptionError("body", f"the data needs a body column (it has {sorted(columns)})")
        unknown = columns - WRITE_COLUMNS
        if unknown:
            raise OptionError(
                "columns", f"{sorted(unknown)} are not sink columns ({sorted(WRITE_COLUMNS)})"
            )
        topic = given.get("topic", "").strip() or None
        if topic is None and "topic" not in columns:
            raise OptionError("topic", "give the topic option or a topic column")
        default = next(
            s
            for s, col in (("column", "queueId"), ("hash", "keys"), ("roundrobin", None))
            if col is None or col in columns
        )
        selector = given.get("queueselector", default).strip().lower()
        if selector not in SELECTORS:
            raise OptionError("queueSelector", f"{selector!r} is not one of {SELECTORS}")
        if selector == "column" and "queueId" not in columns:
            raise OptionError("queueSelector", "column routing needs a queueId column")
        if selector == "hash" and "keys" not in columns:
            raise OptionError("queueSelector", "hash routing needs a keys column")
        exactly_once = given.get("exactlyonce", "true").strip().lower()
        if exactly_once not in ("true", "false"):
            raise OptionError("exactlyOnce", f"{exactly_once!r} is not true or false")
        return cls(
            namesrv_addr=namesrv,
            topic=topic,
            selector=selector,
            exactly_once=exactly_once == "true",
            sink_log_topic=given.get("sinklogtopic", SINK_LOG_TOPIC).strip() or SINK_LOG_TOPIC,
            credentials=acl_credentials(given),
            tls=client_tls(given),
        )


@dataclass
class TaskWritten(WriterCommitMessage):
    sent: int
    skipped: int


def _refuse_overwrite(overwrite: bool) -> None:
    if overwrite:
        raise OptionError("mode", "a topic can only be appended to: use mode('append')")


def batch_writer(options: Mapping[str, str], schema: StructType, overwrite: bool) -> BatchWriter:
    _refuse_overwrite(overwrite)
    return BatchWriter(WriteOptions.parse(options, schema), uuid.uuid4().hex)


def stream_writer(options: Mapping[str, str], schema: StructType, overwrite: bool) -> StreamWriter:
    _refuse_overwrite(overwrite)
    return StreamWriter(WriteOptions.parse(options, schema))


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, options: WriteOptions, write_id: str) -> None:
        self.options = options
        self.write_id = write_id  # made on the driver: the same for every task and retry

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskWritten:
        context = TaskContext.get()
        partition = context.partitionId() if context else 0
        return write_task(self.options, f"{self.write_id}:0:{partition}", iterator)


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskWritten:
        context = TaskContext.get()
        assert context is not None, "a streaming write runs in a Spark task"
        query = context.getLocalProperty("sql.streaming.queryId")
        batch = context.getLocalProperty("streaming.sql.batchId")
        return write_task(self.options, f"{query}:{batch}:{context.partitionId()}", iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: the tasks' messages are stored (and visible) when they finish."""


Outgoing = tuple[Message, int | None]  # a message and its queueId column, if any


CHUNK_ROWS = 8192  # a task sends this many rows at a time (memory stays bounded)


def write_task(options: WriteOptions, task: str, batches: Iterator[pa.RecordBatch]) -> TaskWritten:
    cluster = shared_cluster(options.namesrv_addr, options.credentials, options.tls)
    if not options.exactly_once:
        sent = 0
        for chunk in _chunks(_messages(options, task, batches)):
            cluster.send_all(_route(cluster, options, chunk))
            sent += len(chunk)
        return TaskWritten(sent, 0)
    started, done = _marker_id(task, "started"), _marker_id(task, "done")
    found = cluster.query_ids(options.sink_log_topic, [started, done])
    if done in found:
        return TaskWritten(0, sum(batch.num_rows for batch in batches))
    resuming = started in found  # an earlier attempt sent some of these: send only the rest
    if not resuming:
        _mark(cluster, options, task, "started")
    sent = skipped = 0
    for chunk in _chunks(_messages(options, task, batches)):
        if resuming:
            stored = _stored_ids(cluster, chunk)
            kept = [(m, q) for m, q in chunk if m.properties[UNIQ_KEY] not in stored]
            skipped += len(chunk) - len(kept)
            chunk = kept
        cluster.send_all(_route(cluster, options, chunk))
        sent += len(chunk)
    _mark(cluster, options, task, "done")
    return TaskWritten(sent, skipped)


def _chunks(outgoing: Iterator[Outgoing]) -> Iterator[list[Outgoing]]:
    chunk: list[Outgoing] = []
    for item in outgoing:
        chunk.append(item)
        if len(chunk) >= CHUNK_ROWS:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _stored_ids(cluster: Cluster, chunk: list[Outgoing]) -> set[str]:
    """The UNIQ_KEYs of `chunk` that the target topics' key index already holds."""
    stored: set[str] = set()
    for topic in {m.topic for m, _ in chunk}:
        ids = [m.properties[UNIQ_KEY] for m, _ in chunk if m.topic == topic]
        stored |= cluster.query_ids(topic, ids)
    return stored


def _marker_id(task: str, state: str) -> str:
    return _uniq_key(f"{task}:{state}")


def _uniq_key(name: str) -> str:
    """A UNIQ_KEY-shaped id (32 hex digits) that the same name always gives."""
    return hashlib.blake2b(name.encode(), digest_size=16).hexdigest().upper()


def _mark(cluster: Cluster, options: WriteOptions, task: str, state: str) -> None:
    marker = Message(
        options.sink_log_topic,
        f"{task} {state}".encode(),
        properties={UNIQ_KEY: _marker_id(task, state)},
    )
    cluster.send_all([(marker, None)])


def _messages(
    options: WriteOptions, task: str, batches: Iterator[pa.RecordBatch]
) -> Iterator[Outgoing]:
    seen: Counter[bytes] = Counter()
    for batch in batches:
        columns = {name: batch.column(name).to_pylist() for name in batch.schema.names}
        for row in range(batch.num_rows):
            message, queue_id = _message(options, {n: values[row] for n, values in columns.items()})
            if options.exactly_once:
                # Content and occurrence, not position: a replay may order a task's rows anew.
                content = _content_digest(message)
                seen[content] += 1
                message.properties[UNIQ_KEY] = _uniq_key(f"{task}:{content.hex()}:{seen[content]}")
            yield message, queue_id


def _content_digest(message: Message) -> bytes:
    digest = hashlib.blake2b(digest_size=16)
    for part in (message.topic.encode(), message.body, repr(message.tags).encode()):
        digest.update(len(part).to_bytes(4, "big") + part)
    digest.update(repr((list(message.keys), sorted(message.properties.items()))).encode())
    return digest.digest()


def _message(options: WriteOptions, row: dict[str, Any]) -> Outgoing:
    body = row["body"]
    if body is None:
        raise ValueError("a row has a null body")
    if isinstance(body, str):
        body = body.encode()
    topic = options.topic or row.get("topic")
    if not topic:
        raise ValueError("a row has no topic (and no topic option was given)")
    keys = row.get("keys") or ()
    if isinstance(keys, str):
        keys = keys.split()
    message = Message(
        topic,
        bytes(body),
        tags=row.get("tags") or None,
        keys=tuple(keys),
        properties=dict(row.get("properties") or {}),
        delay_level=int(row.get("delayTimeLevel") or 0),
    )
    queue_id = row.get("queueId")
    return message, None if queue_id is None else int(queue_id)


def _route(
    cluster: Cluster, options: WriteOptions, outgoing: list[Outgoing]
) -> list[tuple[Message, MessageQueue | None]]:
    """Each message with its queue (None: the producer's round robin). `queueId` indexes the
    topic's write queues sorted by broker name, then queue id (on one broker: the queue id)."""
    if options.selector == "roundrobin":
        return [(message, None) for message, _ in outgoing]
    routed: list[tuple[Message, MessageQueue | None]] = []
    queues: dict[str, list[MessageQueue]] = {}
    for message, queue_id in outgoing:
        if message.topic not in queues:
            queues[message.topic] = sorted(cluster.write_queues(message.topic))
        candidates = queues[message.topic]
        if options.selector == "column":
            if queue_id is None:
                raise ValueError("a row has a null queueId")
            if not 0 <= queue_id < len(candidates):
                raise ValueError(
                    f"queueId {queue_id} is not a write queue of {message.topic} "
                    f"(it has {len(candidates)})"
                )
            index = queue_id
        else:
            index = abs(java_string_hash(" ".join(message.keys))) % len(candidates)
        routed.append((message, candidates[index]))
    return routed

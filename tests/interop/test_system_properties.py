"""The records a broker derives from a message, property by property, on every target.

A retry (CONSUMER_SEND_MSG_BACK into SCHEDULE_TOPIC_XXXX, then %RETRY%group), a dead letter
(%DLQ%group, by maxReconsumeTimes or delay level -1), a consumer's fallback send to %RETRY%group,
a delayed message before and after it fires, and a transactional half message with what commit
and rollback write. Each record is pulled back and compared whole with what RocketMQ 4.9 stores:
every property (ORIGIN_MESSAGE_ID, RETRY_TOPIC, REAL_TOPIC, REAL_QID, DELAY, RECONSUME_TIME,
MAX_RECONSUME_TIMES, TRAN_MSG, PGROUP, UNIQ_KEY, CLUSTER, TAGS, KEYS, WAIT and the user's), the
sysFlag, reconsumeTimes, prepared transaction offset, flag, born time and hosts, and the body.

Values that differ per run are written as what they must relate to: ORIGIN_MESSAGE_ID is the
offsetMsgId of the first record on that broker, UNIQ_KEY the id the producer reported, CLUSTER
the target's cluster name. The expectations come from RocketMQ's broker source
(SendMessageProcessor, CommitLog.asyncPutMessage, ScheduleMessageService.messageTimeup,
EndTransactionProcessor, TransactionalMessageBridge); run against RocketMQ, they pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from interop.drivers import produce_messages
from interop.target import ClusterTarget
from sidewinder.protocol.message import MessageConst as Prop
from sidewinder.protocol.record import MessageRecord
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import unique
from tests.interop.scenarios import new_topic
from tests.interop.stored_records import (
    Differences,
    RecordReader,
    offset_msg_id,
    send_back,
    send_raw,
    stored,
    uniq_key,
)

pytestmark = pytest.mark.interop

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
QUEUES = 2
TAG = "TagS"
USER_PROPS = {"color": "blue", "n": "7"}
COMMIT = 0x8  # the sysFlag transaction type of a committed message
DEFAULT_MAX_RECONSUME_TIMES = 16  # the Java push consumer's default


@pytest.fixture
def reader(client: SyncRemotingClient, target: ClusterTarget) -> RecordReader:
    return RecordReader(client, target, unique("RecordReader"))


@pytest.fixture
def diffs() -> Differences:
    """Collects the differences of a test's records; the test ends with `diffs.check()`."""
    return Differences()


def produce(target: ClusterTarget, topic: str, count: int, **options: Any) -> list[dict[str, Any]]:
    """Messages from the stock Java client, with a tag, keys and user properties."""
    sent = produce_messages(
        "java",
        namesrv=target.namesrv_addr,
        topic=topic,
        count=count,
        group=options.pop("group", unique("PG")),
        tag=TAG,
        prop=[f"{k}={v}" for k, v in USER_PROPS.items()],
        **options,
    )
    return sorted(sent, key=lambda e: e["index"])


def by_uniq_key(msg_id: str) -> Callable[[MessageRecord], bool]:
    return lambda record: uniq_key(record) == msg_id


def expect(base: MessageRecord, properties: dict[str, str], **fields: Any) -> dict[str, Any]:
    """`stored(base)` with these fields and exactly these properties, well formed."""
    return {
        **stored(base),
        **fields,
        "properties": properties,
        "repeatedNames": [],
        "trailingSeparator": False,
    }


def sent_properties(target: ClusterTarget, sent: dict[str, Any], **more: str) -> dict[str, str]:
    """What the broker stores of a Java send: KEYS, TAGS, UNIQ_KEY, the user's, and CLUSTER."""
    return {
        Prop.KEYS: sent["keys"],
        Prop.TAGS: TAG,
        Prop.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: sent["msgId"],
        Prop.CLUSTER: target.cluster_name,
        **USER_PROPS,
        **more,
    }


def read_originals(
    reader: RecordReader,
    diffs: Differences,
    target: ClusterTarget,
    topic: str,
    sent: list[dict[str, Any]],
) -> list[MessageRecord]:
    """The records of plain sends, checked first: every retry below starts from them."""
    originals = []
    for e in sent:
        record = reader.wait_for(topic, range(QUEUES), by_uniq_key(e["msgId"]))
        # RocketMQ 4.9 does not store the WAIT=true every Java message carries.
        diffs.compare(
            f"sent message {e['index']}",
            record,
            expect(
                record,
                sent_properties(target, e),
                topic=topic,
                queueId=e["queueId"],
                sysFlag=0,
                flag=0,
                reconsumeTimes=0,
                preparedTransactionOffset=0,
            ),
        )
        assert offset_msg_id(record) == e["offsetMsgId"]
        originals.append(record)
    return originals


def sent_back_properties(
    original: MessageRecord, delay: str, scheduled_for: str | None = None
) -> dict[str, str]:
    """A sent-back message's properties (SendMessageProcessor.asyncConsumerSendMsgBack): its
    ORIGIN_MESSAGE_ID is the offsetMsgId of the record sent back, not the request's originMsgId
    (the client's UNIQ_KEY). CommitLog adds REAL_TOPIC and REAL_QID when DELAY schedules it."""
    properties = {
        **original.properties(),
        Prop.RETRY_TOPIC: original.topic,
        Prop.WAIT_STORE_MSG_OK: "false",
        Prop.DELAY_TIME_LEVEL: delay,
        Prop.ORIGIN_MESSAGE_ID: offset_msg_id(original),
    }
    if scheduled_for is not None:
        properties |= {Prop.REAL_TOPIC: scheduled_for, Prop.REAL_QUEUE_ID: "0"}
    return properties


def test_send_back_retries_then_dead_letters(
    target: ClusterTarget, client: SyncRemotingClient, reader: RecordReader, diffs: Differences
) -> None:
    topic = new_topic(target, "SendBack", queues=QUEUES)
    sent = produce(target, topic, 1)
    (original,) = read_originals(reader, diffs, target, topic, sent)
    group = unique("CG")
    retry_topic, dlq_topic = f"%RETRY%{group}", f"%DLQ%{group}"
    is_ours = by_uniq_key(sent[0]["msgId"])

    send_back(
        client, target, original, group=group, delay_level=1, max_reconsume_times=1,
        origin_topic=topic,
    )  # fmt: skip
    retry_props = sent_back_properties(original, "1", scheduled_for=retry_topic)
    scheduled = reader.wait_for(SCHEDULE_TOPIC, [0], is_ours)  # level 1 is queue 0
    diffs.compare(
        "sent back, scheduled",
        scheduled,
        expect(original, retry_props, topic=SCHEDULE_TOPIC, queueId=0, reconsumeTimes=1),
    )
    # Due after 1 s; ScheduleMessageService re-puts it with the schedule record's properties.
    retried = reader.wait_for(retry_topic, [0], is_ours)
    diffs.compare(
        "sent back, in %RETRY%",
        retried,
        expect(original, retry_props, topic=retry_topic, queueId=0, reconsumeTimes=1),
    )

    # Its second failure reaches maxReconsumeTimes (1): the dead letter keeps the first
    # ORIGIN_MESSAGE_ID, not the retry record's id, and says DELAY 0.
    send_back(
        client, target, retried, group=group, delay_level=0, max_reconsume_times=1,
        origin_topic=topic,
    )  # fmt: skip
    dead = reader.wait_for(dlq_topic, [0], is_ours)
    diffs.compare(
        "sent back again, in %DLQ%",
        dead,
        expect(
            original,
            {**retry_props, Prop.DELAY_TIME_LEVEL: "0"},
            topic=dlq_topic,
            queueId=0,
            reconsumeTimes=2,
        ),
    )
    # DELAY 0 does not schedule it: no second schedule record.
    assert len(reader.all_matching(SCHEDULE_TOPIC, [0, 2], is_ours)) == 1
    diffs.check()


def test_send_back_levels(
    target: ClusterTarget, client: SyncRemotingClient, reader: RecordReader, diffs: Differences
) -> None:
    """Delay level -1 dead-letters at once; level 0 means 3 + reconsumeTimes."""
    topic = new_topic(target, "SendBackLevels", queues=QUEUES)
    sent = produce(target, topic, 2)
    to_dlq, to_retry = read_originals(reader, diffs, target, topic, sent)

    group = unique("CG")
    send_back(
        client, target, to_dlq, group=group, delay_level=-1,
        max_reconsume_times=DEFAULT_MAX_RECONSUME_TIMES, origin_topic=topic,
    )  # fmt: skip
    dead = reader.wait_for(f"%DLQ%{group}", [0], by_uniq_key(sent[0]["msgId"]))
    diffs.compare(
        "sent back with level -1, in %DLQ%",
        dead,
        expect(
            to_dlq,
            sent_back_properties(to_dlq, "0"),
            topic=f"%DLQ%{group}",
            queueId=0,
            reconsumeTimes=1,
        ),
    )

    group = unique("CG")
    send_back(
        client, target, to_retry, group=group, delay_level=0,
        max_reconsume_times=DEFAULT_MAX_RECONSUME_TIMES, origin_topic=topic,
    )  # fmt: skip
    scheduled = reader.wait_for(SCHEDULE_TOPIC, [2], by_uniq_key(sent[1]["msgId"]))
    diffs.compare(
        "sent back with level 0, scheduled",
        scheduled,
        expect(
            to_retry,
            sent_back_properties(to_retry, "3", scheduled_for=f"%RETRY%{group}"),
            topic=SCHEDULE_TOPIC,
            queueId=2,
            reconsumeTimes=1,
        ),
    )
    diffs.check()


def test_consumer_fallback_send_to_the_retry_topic(
    target: ClusterTarget, client: SyncRemotingClient, reader: RecordReader, diffs: Differences
) -> None:
    """When CONSUMER_SEND_MSG_BACK fails, the Java push consumer sends the message to
    %RETRY%group itself (DefaultMQPushConsumerImpl.sendMessageBack): the consumed message's
    properties plus RETRY_TOPIC, RECONSUME_TIME, MAX_RECONSUME_TIMES and DELAY 3 + reconsumeTimes,
    the counts also in the header. The broker dead-letters it once reconsumeTimes reaches the
    maximum (handleRetryAndDLQ), and the DELAY still holds it back first."""
    topic = new_topic(target, "Fallback", queues=QUEUES)
    sent = produce(target, topic, 3)
    first, to_retry, to_dlq = read_originals(reader, diffs, target, topic, sent)
    group = unique("CG")
    retry_topic, dlq_topic = f"%RETRY%{group}", f"%DLQ%{group}"
    # A send-back first, so that both brokers have the retry topic (with its one queue).
    send_back(
        client, target, first, group=group, delay_level=1,
        max_reconsume_times=DEFAULT_MAX_RECONSUME_TIMES, origin_topic=topic,
    )  # fmt: skip
    reader.wait_for(SCHEDULE_TOPIC, [0], by_uniq_key(sent[0]["msgId"]))

    def fallback(original: MessageRecord, max_times: int) -> dict[str, str]:
        properties = {
            **original.properties(),
            Prop.RETRY_TOPIC: topic,
            Prop.RECONSUME_TIME: "1",
            Prop.MAX_RECONSUME_TIMES: str(max_times),
            Prop.DELAY_TIME_LEVEL: "3",
        }
        send_raw(
            client,
            target,
            topic=retry_topic,
            body=bytes(original.body),
            properties=properties,
            group=unique("PG"),
            born_timestamp=original.born_timestamp,
            reconsume_times=1,
            max_reconsume_times=max_times,
        )
        return properties

    below_max = fallback(to_retry, 2)
    scheduled = reader.wait_for(SCHEDULE_TOPIC, [2], by_uniq_key(sent[1]["msgId"]))
    assert str(scheduled.born_host).startswith("127.0.0.1:")
    diffs.compare(
        "fallback below the maximum, scheduled",
        scheduled,
        expect(
            to_retry,
            {**below_max, Prop.REAL_TOPIC: retry_topic, Prop.REAL_QUEUE_ID: "0"},
            topic=SCHEDULE_TOPIC,
            queueId=2,
            reconsumeTimes=1,
            bornHost=str(scheduled.born_host),  # our raw client's socket: not what is compared
        ),
    )

    at_max = fallback(to_dlq, 1)
    dlq_props = {**at_max, Prop.REAL_TOPIC: dlq_topic, Prop.REAL_QUEUE_ID: "0"}
    scheduled = reader.wait_for(SCHEDULE_TOPIC, [2], by_uniq_key(sent[2]["msgId"]))
    diffs.compare(
        "fallback at the maximum, scheduled",
        scheduled,
        expect(
            to_dlq,
            dlq_props,
            topic=SCHEDULE_TOPIC,
            queueId=2,
            reconsumeTimes=1,
            bornHost=str(scheduled.born_host),
        ),
    )
    diffs.check()  # a dead letter is only worth awaiting once its schedule record names %DLQ%
    dead = reader.wait_for(dlq_topic, [0], by_uniq_key(sent[2]["msgId"]))
    diffs.compare(
        "fallback at the maximum, in %DLQ%",
        dead,
        expect(
            to_dlq,
            dlq_props,
            topic=dlq_topic,
            queueId=0,
            reconsumeTimes=1,
            bornHost=str(dead.born_host),
        ),
    )
    assert not reader.all_matching(retry_topic, [0], by_uniq_key(sent[2]["msgId"]))
    diffs.check()


def test_delayed_message(target: ClusterTarget, reader: RecordReader, diffs: Differences) -> None:
    topic = new_topic(target, "Delayed", queues=QUEUES)
    (sent,) = produce(target, topic, 1, delay_level=1)
    is_ours = by_uniq_key(sent["msgId"])
    scheduled = reader.wait_for(SCHEDULE_TOPIC, [0], is_ours)
    # A delayed send keeps its WAIT: CommitLog rebuilds the properties after the send processor
    # dropped it (and put it back in the map).
    delayed_props = sent_properties(
        target,
        sent,
        **{
            Prop.WAIT_STORE_MSG_OK: "true",
            Prop.DELAY_TIME_LEVEL: "1",
            Prop.REAL_TOPIC: topic,
            Prop.REAL_QUEUE_ID: str(sent["queueId"]),
        },
    )
    record_fields = {"sysFlag": 0, "flag": 0, "reconsumeTimes": 0, "preparedTransactionOffset": 0}
    diffs.compare(
        "delayed, scheduled",
        scheduled,
        expect(scheduled, delayed_props, topic=SCHEDULE_TOPIC, queueId=0, **record_fields),
    )
    # Fired: messageTimeup stores the schedule record's properties as they were, DELAY,
    # REAL_TOPIC and REAL_QID included.
    fired = reader.wait_for(topic, range(QUEUES), is_ours)
    diffs.compare(
        "delayed, fired",
        fired,
        expect(scheduled, delayed_props, topic=topic, queueId=sent["queueId"], **record_fields),
    )
    diffs.check()


@pytest.mark.parametrize("answer", ["commit", "rollback", "unknown-commit", "unknown-rollback"])
def test_transaction(
    target: ClusterTarget,
    client: SyncRemotingClient,
    reader: RecordReader,
    diffs: Differences,
    answer: str,
) -> None:
    topic = new_topic(target, "TxProps", queues=QUEUES)
    group = unique("TXG")
    (sent,) = produce(target, topic, 1, group=group, answer=answer)
    is_ours = by_uniq_key(sent["msgId"])
    half = reader.wait_for(HALF_TOPIC, [0], is_ours)
    half_props = sent_properties(
        target,
        sent,
        **{
            Prop.TRANSACTION_PREPARED: "true",
            Prop.PRODUCER_GROUP: group,
            Prop.WAIT_STORE_MSG_OK: "true",
            Prop.REAL_TOPIC: topic,
            Prop.REAL_QUEUE_ID: str(sent["queueId"]),
        },
    )
    # The producer sends it PREPARED; the half record is stored with no transaction type.
    diffs.compare(
        "half",
        half,
        expect(
            half,
            half_props,
            topic=HALF_TOPIC,
            queueId=0,
            sysFlag=0,
            flag=0,
            reconsumeTimes=0,
            preparedTransactionOffset=0,
        ),
    )
    # Commit and rollback each mark the half settled: an op record whose body is its offset.
    # Both brokers put the committed message first, so it lies between the half and the op.
    # A check first puts the half again, TRANSACTION_CHECK_TIMES counted up, and the verdict
    # then settles that copy (putBackHalfMsgQueue).
    halves = {half.queue_offset: half}

    def settles_ours(record: MessageRecord) -> bool:
        if record.topic == HALF_TOPIC and is_ours(record):
            halves[record.queue_offset] = record
        return record.topic == OP_HALF_TOPIC and bytes(record.body).decode() in map(str, halves)

    walked = reader.walk_until(half, settles_ours)
    op = walked[-1]
    diffs.compare(
        f"{answer} op",
        op,
        expect(
            op,
            {Prop.TAGS: "d", Prop.WAIT_STORE_MSG_OK: "true"},
            topic=OP_HALF_TOPIC,
            queueId=0,
            sysFlag=0,
            flag=0,
            reconsumeTimes=0,
            preparedTransactionOffset=0,
            bornHost=str(op.store_host),
        ),
    )
    copies = [r for r in walked if r.topic == HALF_TOPIC and is_ours(r)]
    for checks, copy in enumerate(copies, 1):
        diffs.compare(
            f"{answer} half, checked {checks}",
            copy,
            expect(
                half,
                {**half_props, Prop.TRANSACTION_CHECK_TIMES: str(checks)},
                topic=HALF_TOPIC,
                queueId=0,
            ),
        )
    settled = halves[int(bytes(op.body))]
    if answer.startswith("unknown-") and (not copies or settled is not copies[-1]):
        diffs.add(
            f"{answer}: the verdict settled half offset {settled.queue_offset} of "
            f"{sorted(halves)}; RocketMQ asks about a checked copy, and settles that"
        )
    settled_props = settled.properties() if settled is not half else half_props
    real = [r for r in walked if r.topic == topic and is_ours(r)]
    if answer.endswith("rollback"):
        assert not real
        assert not reader.all_matching(topic, range(QUEUES), is_ours)
        diffs.check()
        return
    (committed,) = real
    # endMessageTransaction stores the half's properties as they were (TRAN_MSG, REAL_TOPIC
    # and REAL_QID included) with the COMMIT type and the half's offset.
    diffs.compare(
        "committed",
        committed,
        expect(
            settled,
            settled_props,
            topic=topic,
            queueId=sent["queueId"],
            sysFlag=COMMIT,
            preparedTransactionOffset=settled.phy_offset,
        ),
    )
    # Sent back, a committed message keeps its COMMIT type (so CommitLog still delays it) but
    # no longer points at the half.
    retry_topic = f"%RETRY%{unique('CG')}"
    send_back(
        client, target, committed, group=retry_topic.removeprefix("%RETRY%"), delay_level=1,
        max_reconsume_times=DEFAULT_MAX_RECONSUME_TIMES, origin_topic=topic,
    )  # fmt: skip
    scheduled = reader.wait_for(SCHEDULE_TOPIC, [0], is_ours)
    diffs.compare(
        "committed, sent back, scheduled",
        scheduled,
        expect(
            committed,
            sent_back_properties(committed, "1", scheduled_for=retry_topic),
            topic=SCHEDULE_TOPIC,
            queueId=0,
            reconsumeTimes=1,
            preparedTransactionOffset=0,
        ),
    )
    diffs.check()

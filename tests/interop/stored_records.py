"""Read back the records a broker wrote, through our raw remoting client, on any target.

    reader = RecordReader(client, target)
    record = reader.wait_for(SCHEDULE_TOPIC, [0], lambda r: uniq_key(r) == msg_id)
    stored(record)  # every field the broker chooses, ready to compare with ==

Records are pulled (PULL_MESSAGE without the suspend flag, subscription `*`) and decoded with
sidewinder.protocol.record, the same bytes on both targets. System topics (SCHEDULE_TOPIC_XXXX,
RMQ_SYS_TRANS_HALF_TOPIC, ...) are pulled like any other: both brokers let a group read them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from interop.target import ClusterTarget
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    ViewMessageRequestHeader,
)
from sidewinder.protocol.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    MessageConst,
    encode_offset_msg_id,
    encode_properties,
)
from sidewinder.protocol.record import BlankRecord, MessageRecord, decode_record
from sidewinder.remoting.client import SyncRemotingClient
from tests.helpers import send_request

PULL_SUBSCRIPTION_FLAG = 0x4  # the filter comes with the request; no commit, no suspend
PULL_BATCH = 32
PULL_ANSWERS = (ResponseCode.SUCCESS, ResponseCode.PULL_OFFSET_MOVED, ResponseCode.PULL_NOT_FOUND)


def offset_msg_id(record: MessageRecord) -> str:
    """The broker's id of a stored record (what MessageExt.getMsgId() is on the broker)."""
    return encode_offset_msg_id(
        record.store_host.address, record.store_host.port, record.phy_offset
    )


def uniq_key(record: MessageRecord) -> str | None:
    return record.properties().get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


def property_names(record: MessageRecord) -> list[str]:
    """Every property name in stored order, repeats kept (a dict would hide a second CLUSTER)."""
    text = bytes(record.properties_bytes).decode(errors="surrogateescape")
    return [pair.partition(NAME_VALUE_SEPARATOR)[0] for pair in text.split(PROPERTY_SEPARATOR)]


def stored(record: MessageRecord) -> dict[str, Any]:
    """The fields of a record that the broker decides, for an exact comparison.

    Offsets and store timestamps are left out: they differ per run and per target. Everything
    else is here, every property included, so an extra or a missing one shows in the diff.
    """
    names = property_names(record)
    return {
        "topic": record.topic,
        "queueId": record.queue_id,
        "sysFlag": record.sys_flag,
        "flag": record.flag,
        "reconsumeTimes": record.reconsume_times,
        "preparedTransactionOffset": record.prepared_transaction_offset,
        "bornTimestamp": record.born_timestamp,
        "bornHost": str(record.born_host),
        "storeHost": str(record.store_host),
        "body": bytes(record.body),
        "properties": record.properties(),
        # RocketMQ 4.9 writes each name once and no separator after the last pair.
        "repeatedNames": sorted({name for name in names if names.count(name) > 1}),
        "trailingSeparator": bytes(record.properties_bytes).endswith(PROPERTY_SEPARATOR.encode()),
    }


ABSENT = "<absent>"


class Differences:
    """Every way the stored records differ from what RocketMQ stores, reported together, so
    that one test run lists them all (a wrong WAIT on the first record does not hide a wrong
    ORIGIN_MESSAGE_ID on the third)."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def compare(self, what: str, record: MessageRecord, expected: dict[str, Any]) -> None:
        actual = stored(record)
        for field in sorted(actual.keys() | expected.keys()):
            if field == "properties":
                self._compare_properties(what, actual[field], expected[field])
            elif actual.get(field, ABSENT) != expected.get(field, ABSENT):
                self.found.append(
                    f"{what}: {field} is {actual.get(field, ABSENT)!r}, "
                    f"RocketMQ stores {expected.get(field, ABSENT)!r}"
                )

    def _compare_properties(
        self, what: str, actual: dict[str, str], expected: dict[str, str]
    ) -> None:
        for name in sorted(actual.keys() | expected.keys()):
            if actual.get(name, ABSENT) != expected.get(name, ABSENT):
                self.found.append(
                    f"{what}: property {name} is {actual.get(name, ABSENT)!r}, "
                    f"RocketMQ stores {expected.get(name, ABSENT)!r}"
                )

    def add(self, difference: str) -> None:
        self.found.append(difference)

    def check(self) -> None:
        assert not self.found, "\n".join(["stored records differ:", *self.found])


class RecordReader:
    """Pulls queues of one broker, remembering how far each queue was read."""

    def __init__(self, client: SyncRemotingClient, target: ClusterTarget, group: str) -> None:
        self.client = client
        self.target = target
        self.group = group
        self.next_offset: dict[tuple[str, int], int] = {}
        self.seen: dict[tuple[str, int], list[MessageRecord]] = {}

    def read_new(self, topic: str, queue_id: int) -> list[MessageRecord]:
        """The records of a queue stored since the last call (all of them the first time)."""
        key = (topic, queue_id)
        offset = self.next_offset.get(key, 0)
        new: list[MessageRecord] = []
        while True:
            reply = self._pull(topic, queue_id, offset)
            if reply.code == ResponseCode.TOPIC_NOT_EXIST:
                break  # not yet: RocketMQ creates system topics such as the op topic on first use
            if reply.code not in PULL_ANSWERS:
                raise AssertionError(
                    f"pull {topic}/{queue_id}@{offset}: {reply.code} {reply.remark}"
                )
            header = PullMessageResponseHeader.from_ext(reply.ext_fields)
            if reply.code == ResponseCode.SUCCESS:
                new.extend(decode_all(reply.body_bytes))
            if header.next_begin_offset == offset or reply.code == ResponseCode.PULL_NOT_FOUND:
                break
            offset = header.next_begin_offset
        self.next_offset[key] = offset
        self.seen.setdefault(key, []).extend(new)
        return new

    def wait_for(
        self,
        topic: str,
        queue_ids: Iterable[int],
        match: Callable[[MessageRecord], bool],
        *,
        timeout_s: float = 30,
    ) -> MessageRecord:
        """The first record of these queues that matches, polling until one is stored."""
        queue_ids = list(queue_ids)
        deadline = time.monotonic() + timeout_s
        for queue_id in queue_ids:  # records read by an earlier call count too
            self.read_new(topic, queue_id)
        while True:
            for queue_id in queue_ids:
                for record in self.seen.get((topic, queue_id), []):
                    if match(record):
                        return record
            assert time.monotonic() < deadline, f"no matching record in {topic} {queue_ids}"
            time.sleep(0.2)
            for queue_id in queue_ids:
                self.read_new(topic, queue_id)

    def all_matching(
        self, topic: str, queue_ids: Iterable[int], match: Callable[[MessageRecord], bool]
    ) -> list[MessageRecord]:
        found = []
        for queue_id in queue_ids:
            self.read_new(topic, queue_id)
            found += [r for r in self.seen.get((topic, queue_id), []) if match(r)]
        return found

    def walk_until(
        self, start: MessageRecord, match: Callable[[MessageRecord], bool], *, timeout_s: float = 30
    ) -> list[MessageRecord]:
        """The records after `start` in the CommitLog up to the first that matches (the last
        one returned), read offset by offset with VIEW_MESSAGE_BY_ID: for records no queue can
        be pulled from. (RocketMQ 4.9 writes RMQ_SYS_TRANS_OP_HALF_TOPIC without a topic
        config, and a pull of it says the topic does not exist.)"""
        segment = int(self.target.broker_conf.get("mappedFileSizeCommitLog") or 1 << 30)
        offset = start.phy_offset + start.total_size
        deadline = time.monotonic() + timeout_s
        walked: list[MessageRecord] = []
        while True:
            found = self._view(offset)
            if isinstance(found, MessageRecord):
                walked.append(found)
                if match(found):
                    return walked
                offset += found.total_size
                continue
            if isinstance(found, BlankRecord):  # RocketMQ returns a blank tail as it is
                offset += found.total_size
                continue
            # Nothing here: the end of the CommitLog (wait), or a segment's tail that this
            # broker does not show (go on at the next segment, once something is there).
            next_segment = (offset // segment + 1) * segment
            if isinstance(self._view(next_segment), MessageRecord):
                offset = next_segment
                continue
            assert time.monotonic() < deadline, f"no matching record after {start.phy_offset}"
            time.sleep(0.2)

    def _view(self, offset: int) -> MessageRecord | BlankRecord | None:
        header = ViewMessageRequestHeader(offset)
        request = RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, header.to_ext())
        reply = self.client.invoke(self.target.broker_addr, request, 10)
        if reply.code != ResponseCode.SUCCESS:
            return None
        record = decode_record(reply.body_bytes, check_crc=True)
        return record if isinstance(record, MessageRecord | BlankRecord) else None

    def _pull(self, topic: str, queue_id: int, offset: int) -> RemotingCommand:
        header = PullMessageRequestHeader(
            consumer_group=self.group,
            topic=topic,
            queue_id=queue_id,
            queue_offset=offset,
            max_msg_nums=PULL_BATCH,
            sys_flag=PULL_SUBSCRIPTION_FLAG,
            commit_offset=0,
            suspend_timeout_millis=0,
            sub_version=0,
            subscription="*",
            expression_type="TAG",
        )
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
        return self.client.invoke(self.target.broker_addr, request, 10)


def decode_all(body: bytes) -> list[MessageRecord]:
    """The records of a PULL_MESSAGE body, back to back."""
    records = []
    position = 0
    while position < len(body):
        record = decode_record(body, position, check_crc=True)
        assert isinstance(record, MessageRecord), f"not a message at byte {position}"
        records.append(record)
        position += record.total_size
    return records


def send_back(
    client: SyncRemotingClient,
    target: ClusterTarget,
    record: MessageRecord,
    *,
    group: str,
    delay_level: int,
    max_reconsume_times: int,
    origin_topic: str,
) -> None:
    """CONSUMER_SEND_MSG_BACK of a consumed record, with the header the Java 4.9.8 push consumer
    fills (MQClientAPIImpl.consumerSendMessageBack): its offset, the client's msgId (UNIQ_KEY) as
    originMsgId, the topic it was consumed as (the original one, also for a retried message)."""
    header = ConsumerSendMsgBackRequestHeader(
        offset=record.phy_offset,
        group=group,
        delay_level=delay_level,
        origin_msg_id=uniq_key(record) or offset_msg_id(record),
        origin_topic=origin_topic,
        unit_mode=False,
        max_reconsume_times=max_reconsume_times,
    )
    request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext())
    reply = client.invoke(target.broker_addr, request, 10)
    assert reply.code == ResponseCode.SUCCESS, (reply.code, reply.remark)


def send_raw(
    client: SyncRemotingClient,
    target: ClusterTarget,
    *,
    topic: str,
    body: bytes,
    properties: dict[str, str],
    group: str,
    born_timestamp: int,
    reconsume_times: int | None = None,
    max_reconsume_times: int | None = None,
) -> None:
    """SEND_MESSAGE_V2 to queue 0, as a producer's sendKernelImpl builds it."""
    request = send_request(
        topic,
        body,
        group=group,
        properties=encode_properties(properties, trailing=False).decode(),
        born_timestamp=born_timestamp,
        reconsume_times=reconsume_times,
        max_reconsume_times=max_reconsume_times,
    )
    reply = client.invoke(target.broker_addr, request, 10)
    assert reply.code == ResponseCode.SUCCESS, (reply.code, reply.remark)

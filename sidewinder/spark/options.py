"""The `rocketmq` data source's options, parsed and checked before any broker is asked.

    read = ReadOptions.parse({"namesrvAddr": "127.0.0.1:9876", "subscribe": "Orders"}, stream=False)
    read.topics              # ("Orders",)
    read.starting            # OffsetSpec("earliest") for a batch query

Names and meanings follow Spark's Kafka connector. Option keys are matched case-insensitively
(Spark hands them over as a CaseInsensitiveDict, whose `dict()` lower-cases them); values are
strings. Every error is an `OptionError` whose message starts with the option's name, so a bad or
contradictory option fails when the query is analysed and says which one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sidewinder.protocol.acl import Credentials, credentials
from sidewinder.remoting.tls import TLS_KEYS, TlsConfig, TlsError, client_context

EARLIEST, LATEST = -2, -1  # Kafka's (and the old RocketMQ connector's) JSON sentinels
# A queue range longer than this is read by several tasks (offsets are dense: sizes are known).
DEFAULT_RECORDS_PER_PARTITION = 100_000

TOPIC_SELECTORS = ("topic", "subscribe", "subscribePattern", "assign")
# RocketMQ's TLS keys a client reads (TlsSystemConfig), by the lower-cased name Spark hands over.
CLIENT_TLS_KEYS = {
    key.lower(): key
    for key in TLS_KEYS
    if key.startswith("tls.client.") or key in ("tls.config.file", "tls.test.mode.enable")
}


class OptionError(ValueError):
    """An option the user gave is bad; the message names it."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"option {option}: {problem}")
        self.option = option


def queue_key(broker_name: str, queue_id: int) -> str:
    """How a queue is named in offsets JSON: `broker-a:3`."""
    return f"{broker_name}:{queue_id}"


def parse_queue_key(option: str, key: str) -> tuple[str, int]:
    broker, sep, queue_id = key.rpartition(":")
    if not sep or not broker or not queue_id.isdigit():
        raise OptionError(option, f"queue {key!r} is not brokerName:queueId (e.g. broker-a:0)")
    return broker, int(queue_id)


@dataclass(frozen=True)
class OffsetSpec:
    """Where reading starts or ends: `earliest`, `latest`, a timestamp, or explicit offsets."""

    kind: str  # "earliest" | "latest" | "timestamp" | "json"
    timestamp_ms: int = 0
    # topic -> queue key -> offset (or EARLIEST / LATEST), for kind "json"
    offsets: Mapping[str, Mapping[str, int]] | None = None


@dataclass(frozen=True)
class ReadOptions:
    namesrv_addr: str
    topics: tuple[str, ...]  # topic / subscribe
    pattern: re.Pattern[str] | None  # subscribePattern
    assign: Mapping[str, tuple[str, ...]] | None  # topic -> queue keys
    starting: OffsetSpec
    ending: OffsetSpec | None  # batch only
    sub_expression: str
    include_properties: bool
    fail_on_data_loss: bool
    max_offsets_per_trigger: int | None
    max_records_per_partition: int
    commit_to_group: str | None
    pull_batch_size: int
    pull_timeout_s: float
    credentials: Credentials | None = None  # accessKey / secretKey: ACL signatures
    tls: TlsConfig | None = None  # tls=true and the tls.* client keys

    @classmethod
    def parse(cls, options: Mapping[str, str], *, stream: bool | None) -> ReadOptions:
        """`stream` None: the checks that hold for both kinds of query only."""
        given = _lowered(options)
        namesrv = _required(given, "namesrvAddr")
        chosen = [name for name in TOPIC_SELECTORS if given.get(name.lower(), "").strip()]
        if len(chosen) != 1:
            raise OptionError(
                "subscribe",
                "give exactly one of topic, subscribe, subscribePattern, assign"
                + (f" (got {', '.join(chosen)})" if chosen else ""),
            )
        selector = chosen[0]
        topics: tuple[str, ...] = ()
        pattern = None
        assign = None
        if selector in ("topic", "subscribe"):
            topics = tuple(t.strip() for t in given[selector.lower()].split(",") if t.strip())
        elif selector == "subscribePattern":
            try:
                pattern = re.compile(given["subscribepattern"])
            except re.error as exc:
                raise OptionError("subscribePattern", f"not a regular expression: {exc}") from None
        else:
            assign = _parse_assign(given["assign"])
        starting = _starting(given, stream)
        ending = _ending(given, stream)
        return cls(
            namesrv_addr=namesrv,
            topics=topics,
            pattern=pattern,
            assign=assign,
            starting=starting,
            ending=ending,
            sub_expression=given.get("subexpression", "*").strip() or "*",
            include_properties=_bool(given, "includeProperties", True),
            fail_on_data_loss=_bool(given, "failOnDataLoss", True),
            max_offsets_per_trigger=_positive(given, "maxOffsetsPerTrigger"),
            max_records_per_partition=(
                _positive(given, "maxRecordsPerPartition") or DEFAULT_RECORDS_PER_PARTITION
            ),
            commit_to_group=given.get("committogroup", "").strip() or None,
            pull_batch_size=_positive(given, "pullBatchSize") or 32,
            pull_timeout_s=(_positive(given, "pullTimeoutMs") or 10_000) / 1000,
            credentials=acl_credentials(given),
            tls=client_tls(given),
        )


def acl_credentials(given: Mapping[str, str]) -> Credentials | None:
    """The `accessKey` and `secretKey` options (both or neither), for a broker with ACL on."""
    try:
        return credentials(given.get("accesskey"), given.get("secretkey"))
    except ValueError as exc:
        raise OptionError("accessKey", str(exc)) from None


def client_tls(given: Mapping[str, str]) -> TlsConfig | None:
    """`tls=true`: connect with TLS, as RocketMQ's clients with -Dtls.enable=true, with
    RocketMQ's client keys beside it (`tls.config.file`, `tls.test.mode.enable`,
    `tls.client.authServer`, `tls.client.trustCertPath`, `tls.client.certPath`, ...), read on
    the driver (the files they name must be on the executors too); None without TLS."""
    keys = {name: value for name, value in given.items() if name.startswith("tls.")}
    for name in keys:
        if name not in CLIENT_TLS_KEYS:
            raise OptionError(
                name, f"is not a TLS client setting ({sorted(CLIENT_TLS_KEYS.values())})"
            )
    if not _bool(given, "tls", False):
        if keys:
            raise OptionError(CLIENT_TLS_KEYS[next(iter(keys))], "needs tls=true")
        return None
    try:
        config = TlsConfig.load({CLIENT_TLS_KEYS[name]: value for name, value in keys.items()})
        client_context(config)  # the trust and key files, checked at analysis
    except TlsError as exc:
        raise OptionError("tls", str(exc)) from None
    return config


def _lowered(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _required(given: Mapping[str, str], name: str) -> str:
    value = given.get(name.lower(), "").strip()
    if not value:
        raise OptionError(name, "is required")
    return value


def _bool(given: Mapping[str, str], name: str, default: bool) -> bool:
    value = given.get(name.lower())
    if value is None:
        return default
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise OptionError(name, f"{value!r} is not true or false")


def _whole(given: Mapping[str, str], name: str, *, least: int, meaning: str) -> int | None:
    """The option as an int of at least `least`, None when it is absent or blank."""
    value = given.get(name.lower())
    if value is None or not value.strip():
        return None
    try:
        number = int(value)
    except ValueError:
        raise OptionError(name, f"{value!r} is not {meaning}") from None
    if number < least:
        raise OptionError(name, f"{number} is below {least}")
    return number


def _positive(given: Mapping[str, str], name: str) -> int | None:
    return _whole(given, name, least=1, meaning="a whole number")


def _timestamp(given: Mapping[str, str], name: str) -> int | None:
    return _whole(given, name, least=0, meaning="milliseconds since the epoch")


def _json_object(name: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(name, f"not earliest, latest or JSON: {exc}") from None
    if not isinstance(value, dict):
        raise OptionError(name, "JSON must be an object of topics")
    return value


def _parse_offsets(name: str, text: str) -> dict[str, dict[str, int]]:
    """`{"T": {"broker-a:0": 23, "broker-a:1": -2}}`, checked for shape and values."""
    parsed: dict[str, dict[str, int]] = {}
    for topic, queues in _json_object(name, text).items():
        if not isinstance(queues, dict) or not queues:
            raise OptionError(name, f"topic {topic!r} must map queues to offsets")
        parsed[topic] = {}
        for key, offset in queues.items():
            parse_queue_key(name, key)
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise OptionError(name, f"offset {offset!r} of {topic} {key} is not an offset")
            parsed[topic][key] = offset
    return parsed


def _parse_assign(text: str) -> dict[str, tuple[str, ...]]:
    assign: dict[str, tuple[str, ...]] = {}
    for topic, queues in _json_object("assign", text).items():
        if not isinstance(queues, list) or not queues:
            raise OptionError("assign", f"topic {topic!r} must list queues like ['broker-a:0']")
        for key in queues:
            parse_queue_key("assign", str(key))
        assign[topic] = tuple(str(k) for k in queues)
    return assign


def _starting(given: Mapping[str, str], stream: bool | None) -> OffsetSpec:
    timestamp = _timestamp(given, "startingTimestamp")
    if timestamp is not None:
        return OffsetSpec("timestamp", timestamp_ms=timestamp)
    text = given.get("startingoffsets", "").strip()
    if not text:
        return OffsetSpec("earliest" if stream is False else "latest")
    if text in ("earliest", "latest"):
        if text == "latest" and stream is False:
            raise OptionError("startingOffsets", "latest is not allowed for a batch query")
        return OffsetSpec(text)
    offsets = _parse_offsets("startingOffsets", text)
    if stream is False and any(v == LATEST for q in offsets.values() for v in q.values()):
        raise OptionError("startingOffsets", "-1 (latest) is not allowed for a batch query")
    return OffsetSpec("json", offsets=offsets)


def _ending(given: Mapping[str, str], stream: bool | None) -> OffsetSpec | None:
    timestamp = _timestamp(given, "endingTimestamp")
    text = given.get("endingoffsets", "").strip()
    if stream:
        for name, value in (("endingOffsets", text), ("endingTimestamp", timestamp)):
            if value:
                raise OptionError(name, "is for batch queries only")
        return None
    if timestamp is not None:
        return OffsetSpec("timestamp", timestamp_ms=timestamp)
    if not text or text == "latest":
        return OffsetSpec("latest")
    if text == "earliest":
        raise OptionError("endingOffsets", "earliest is not allowed as an end")
    offsets = _parse_offsets("endingOffsets", text)
    if any(v == EARLIEST for q in offsets.values() for v in q.values()):
        raise OptionError("endingOffsets", "-2 (earliest) is not allowed as an end")
    return OffsetSpec("json", offsets=offsets)

"""From options to concrete offsets and ranges: which queues, where each starts and ends, how a
range is split into tasks, and how a micro-batch's rows are shared among queues.

    queues = discover_queues(cluster, options)               # topic -> its queues
    starts = resolve(cluster, options.starting, queues, "startingOffsets", ...)
    offsets_json(starts)                                     # {"T": {"broker-a:0": 12}}

Offsets travel as JSON dicts (Spark keeps them verbatim in the checkpoint): topic -> queue key
(`brokerName:queueId`) -> offset, keys sorted so equal offsets are equal text.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from sidewinder.client.route_cache import MessageQueue
from sidewinder.spark.cluster import Cluster, DataLossError
from sidewinder.spark.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    OptionError,
    ReadOptions,
    parse_queue_key,
    queue_key,
)

log = logging.getLogger(__name__)
QueueOffsets = dict[MessageQueue, int]


def offsets_json(offsets: Mapping[MessageQueue, int]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for queue in sorted(offsets):
        table.setdefault(queue.topic, {})[queue_key(queue.broker_name, queue.queue_id)] = offsets[
            queue
        ]
    return table


def offsets_from_json(table: Mapping[str, Mapping[str, int]]) -> QueueOffsets:
    offsets = {}
    for topic, queues in table.items():
        for key, offset in queues.items():
            broker, queue_id = parse_queue_key("offsets", key)
            offsets[MessageQueue(topic, broker, queue_id)] = int(offset)
    return offsets


def discover_queues(cluster: Cluster, options: ReadOptions) -> list[MessageQueue]:
    """The queues a query reads, sorted; unknown topics and queues fail naming the option."""
    if options.pattern is not None:
        topics = [t for t in cluster.topics() if options.pattern.fullmatch(t)]
        return sorted(q for t in topics for q in cluster.read_queues(t))
    if options.assign is not None:
        queues = []
        for topic, keys in options.assign.items():
            known = {queue_key(q.broker_name, q.queue_id): q for q in cluster.read_queues(topic)}
            if not known:
                raise OptionError("assign", f"topic {topic} does not exist")
            for key in keys:
                if key not in known:
                    raise OptionError("assign", f"topic {topic} has no readable queue {key}")
                queues.append(known[key])
        return sorted(set(queues))
    queues = []
    for topic in options.topics:
        found = cluster.read_queues(topic)
        if not found:
            raise OptionError("subscribe", f"topic {topic} does not exist")
        queues += found
    return sorted(queues)


def resolve(
    cluster: Cluster,
    spec: OffsetSpec,
    queues: list[MessageQueue],
    option: str,
    *,
    fail_on_data_loss: bool,
) -> QueueOffsets:
    """Concrete offsets of `queues` for a start or end spec, clamped to what the broker holds."""
    bounds = {q: cluster.bounds(q) for q in queues}
    if spec.kind == "earliest":
        return {q: low for q, (low, _) in bounds.items()}
    if spec.kind == "latest":
        return {q: high for q, (_, high) in bounds.items()}
    if spec.kind == "timestamp":
        return {q: cluster.offset_at(q, spec.timestamp_ms) for q in queues}
    assert spec.offsets is not None
    given = offsets_from_json(spec.offsets)
    missing = sorted(set(queues) - set(given))
    extra = sorted(set(given) - set(queues))
    if missing or extra:
        named = [
            f"{what} {', '.join(_named(q) for q in qs)}"
            for what, qs in (("missing", missing), ("unknown", extra))
            if qs
        ]
        raise OptionError(option, "must name exactly the query's queues: " + "; ".join(named))
    resolved = {}
    for queue, offset in given.items():
        low, high = bounds[queue]
        if offset == EARLIEST:
            offset = low
        elif offset == LATEST:
            offset = high
        elif offset < low:
            lost = _named(queue)
            if fail_on_data_loss:
                raise DataLossError(
                    f"{option}: offset {offset} of {lost} is below the queue's first "
                    f"offset {low} (cleaned up); set failOnDataLoss=false to skip"
                )
            log.warning("offsets %d..%d of %s are gone; starting at %d", offset, low, lost, low)
            offset = low
        resolved[queue] = min(offset, high)
    return resolved


def split_ranges(
    starts: Mapping[MessageQueue, int],
    ends: Mapping[MessageQueue, int],
    max_records: int | None,
) -> list[tuple[MessageQueue, int, int]]:
    """One (queue, start, end) per non-empty queue range, split into pieces of at most
    `max_records` (offsets are dense, so a range's size is known before reading it)."""
    ranges = []
    for queue in sorted(ends):
        start, end = starts.get(queue, 0), ends[queue]
        step = max_records or max(end - start, 1)
        ranges += [(queue, at, min(at + step, end)) for at in range(start, end, step)]
    return ranges


def limit_rows(
    starts: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int], max_rows: int
) -> QueueOffsets:
    """Ends that read at most about `max_rows` in all, shared in proportion to each queue's
    backlog; every queue with a backlog gets at least one row, so none starves."""
    backlog = {q: max(latest[q] - starts.get(q, 0), 0) for q in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    # One row to each queue with a backlog first, then the rest of `max_rows` in proportion to
    # what each has beyond that one: rounding the proportional shares down and then raising the
    # zeros to one would read more than `max_rows` when many queues hold little.
    queues_waiting = sum(1 for waiting in backlog.values() if waiting)
    rest = max(max_rows - queues_waiting, 0)
    beyond_first = total - queues_waiting
    ends = {}
    for queue, waiting in backlog.items():
        share = 0
        if waiting:
            share = 1 + (rest * (waiting - 1) // beyond_first if beyond_first else 0)
        ends[queue] = starts.get(queue, 0) + min(share, waiting)
    return ends


def _named(queue: MessageQueue) -> str:
    return f"{queue.topic} {queue_key(queue.broker_name, queue.queue_id)}"

"""Admin calls about consumer groups, beside admin.py: who is connected, what a client reports
of itself, resetting and copying offsets, and whether a message was consumed.

    admin = Admin("127.0.0.1:9876")
    connection = await consumer_connection(admin, "billing")
    for queue, offset in await reset_offset(admin, "Orders", "billing", timestamp_ms=-1):
        print(queue, offset)

The broker a group's calls go to is the first of its retry topic's route, as DefaultMQAdminExt
picks it: a group that never consumed has no retry topic, and the lookup fails with
TOPIC_NOT_EXIST naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidewinder.client.admin import Admin, QueueProgress
from sidewinder.client.pulling import ReceivedMessage, commit_offset, offset_at, queue_bound
from sidewinder.client.route_cache import MASTER_ID, ClientError, MessageQueue
from sidewinder.protocol import body
from sidewinder.protocol.codes import LanguageCode, RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand

RETRY_PREFIX = "%RETRY%"
# The groups every RocketMQ broker keeps for itself (MixAll): tools list the others.
SYSTEM_GROUPS = frozenset(
    {
        "DEFAULT_CONSUMER",
        "DEFAULT_PRODUCER",
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "__MONITOR_CONSUMER",
        "CLIENT_INNER_PRODUCER",
        "SELF_TEST_P_GROUP",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_ONSAPI_PULL",
        "CID_RMQ_SYS_TRANS",
    }
)


def is_system_group(name: str) -> bool:
    return name in SYSTEM_GROUPS or name.startswith("CID_RMQ_SYS_")


@dataclass(frozen=True)
class RollbackStats:
    """One queue of a reset done by the tool itself (the group offline), as RocketMQ's."""

    queue: MessageQueue
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    rollback_offset: int


def select_broker_addr(broker: dict[str, Any]) -> str | None:
    """BrokerData.selectBrokerAddr: the master, else any slave."""
    addrs = {int(k): v for k, v in broker["brokerAddrs"].items()}
    return addrs.get(MASTER_ID) or next(iter(addrs.values()), None)


async def _brokers(admin: Admin, topic: str) -> list[tuple[str, str]]:
    """(broker name, address) of each broker of `topic`'s route, in the route's order."""
    route = await admin.route(topic)
    found = []
    for broker in route.get("brokerDatas") or []:
        addr = select_broker_addr(broker)
        if addr is not None:
            found.append((broker["brokerName"], addr))
    return found


async def group_broker(admin: Admin, group: str) -> str:
    """The broker DefaultMQAdminExt asks about a group: the first of its retry topic's."""
    brokers = await _brokers(admin, RETRY_PREFIX + group)
    if not brokers:
        raise ClientError(ResponseCode.TOPIC_NOT_EXIST, f"no broker serves {RETRY_PREFIX}{group}")
    return brokers[0][1]


async def consumer_connection(
    admin: Admin, group: str, broker_addr: str | None = None
) -> dict[str, Any]:
    """GET_CONSUMER_CONNECTION_LIST: the group's clients, subscriptions and consume type
    (ClientError CONSUMER_NOT_ONLINE when none is connected)."""
    addr = broker_addr or await group_broker(admin, group)
    reply = await admin.ask_broker(
        addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}
    )
    return dict(body.loads(reply.body_bytes))


async def running_info(
    admin: Admin, group: str, client_id: str, *, jstack: bool = False
) -> dict[str, Any]:
    """GET_CONSUMER_RUNNING_INFO, which the broker forwards to the client: its properties,
    subscriptions, queues (keyed by ObjectKey) and rates."""
    addr = await group_broker(admin, group)
    ext = {"consumerGroup": group, "clientId": client_id, "jstackEnable": str(jstack).lower()}
    reply = await admin.ask_broker(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
    return dict(body.loads_keyed(reply.body_bytes))


async def topic_consumers(admin: Admin, topic: str) -> list[str]:
    """QUERY_TOPIC_CONSUME_BY_WHO at the first broker of the topic: the groups with offsets."""
    for _, addr in await _brokers(admin, topic):
        reply = await admin.ask_broker(
            addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic}
        )
        return sorted(body.loads(reply.body_bytes).get("groupList") or [])
    return []


async def reset_offset(
    admin: Admin,
    topic: str,
    group: str,
    timestamp_ms: int,
    *,
    force: bool = True,
    cplus: bool = False,
) -> list[tuple[MessageQueue, int]]:
    """INVOKE_BROKER_TO_RESET_OFFSET at every broker of the topic (-1: to the end); the new
    offset of each queue. ClientError CONSUMER_NOT_ONLINE when no client of the group is
    connected (then reset_offset_old does it)."""
    ext = {"topic": topic, "group": group, "timestamp": str(timestamp_ms), "isForce": str(force)}
    ext["isForce"] = ext["isForce"].lower()
    table: list[tuple[MessageQueue, int]] = []
    for _, addr in await _brokers(admin, topic):
        request = RemotingCommand.request(
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
            ext,
            language=LanguageCode.CPP if cplus else LanguageCode.JAVA,
        )
        reply = await admin.remoting.invoke(addr, request, 30)
        if reply.code != ResponseCode.SUCCESS:
            raise ClientError(reply.code, reply.remark or "")
        if reply.body:
            for mq, offset in body.object_keyed_pairs(reply.body_bytes):
                table.append(
                    (MessageQueue(mq["topic"], mq["brokerName"], int(mq["queueId"])), int(offset))
                )
    return table


async def reset_offset_old(
    admin: Admin, group: str, topic: str, timestamp_ms: int, *, force: bool = True
) -> list[RollbackStats]:
    """The tool's own reset for a group nobody consumes with: each queue's committed offset
    set to the offset at `timestamp_ms` (-1: the queue's end), unless not `force` and that
    is ahead of it (DefaultMQAdminExt.resetOffsetByTimestampOld)."""
    route = await admin.route(topic)
    read_queues = max((int(q["readQueueNums"]) for q in route.get("queueDatas") or []), default=0)
    rows: list[RollbackStats] = []
    for name, addr in await _brokers(admin, topic):
        stats, _ = await admin.consume_stats_at(addr, group)
        mine = [
            (p.queue, p.broker_offset, p.consumer_offset) for p in stats if p.queue.topic == topic
        ]
        if not mine:
            mine = []
            for queue_id in range(read_queues):
                queue = MessageQueue(topic, name, queue_id)
                high = await queue_bound(admin.remoting, addr, queue, RequestCode.GET_MAX_OFFSET)
                low = await queue_bound(admin.remoting, addr, queue, RequestCode.GET_MIN_OFFSET)
                mine.append((queue, high, low))
        for queue, broker_offset, consumer_offset in mine:
            if timestamp_ms == -1:
                target = await queue_bound(admin.remoting, addr, queue, RequestCode.GET_MAX_OFFSET)
            else:
                target = await offset_at(admin.remoting, addr, queue, timestamp_ms)
            rollback = consumer_offset
            if force or target <= consumer_offset:
                rollback = target
                await commit_offset(admin.remoting, addr, group, queue, target)
            rows.append(RollbackStats(queue, broker_offset, consumer_offset, target, rollback))
    return rows


async def clone_offsets(admin: Admin, source: str, dest: str, topic: str) -> None:
    """Every committed offset of `source` (its consume stats at its retry topic's brokers)
    committed for `dest` at the broker of the queue in `topic`'s route."""
    queues: list[QueueProgress] = []
    for _, addr in await _brokers(admin, RETRY_PREFIX + source):
        queues += (await admin.consume_stats_at(addr, source))[0]
    if not queues:
        return
    addrs = dict(await _brokers(admin, topic))
    for progress in queues:
        queue_addr = addrs.get(progress.queue.broker_name)
        if queue_addr is not None and progress.consumer_offset >= 0:
            await commit_offset(
                admin.remoting, queue_addr, dest, progress.queue, progress.consumer_offset
            )


@dataclass(frozen=True)
class MessageTrack:
    """Whether one group consuming the message's topic has consumed it (MessageTrack)."""

    group: str
    kind: str  # NOT_ONLINE, PULL, CONSUMED, CONSUMED_BUT_FILTERED, NOT_CONSUME_YET, UNKNOWN
    desc: str | None = None

    def __str__(self) -> str:
        return (
            f"MessageTrack [consumerGroup={self.group}, trackType={self.kind}, "
            f"exceptionDesc={self.desc}]"
        )


async def message_tracks(admin: Admin, message: ReceivedMessage) -> list[MessageTrack]:
    """A MessageTrack of each group consuming the message's topic (admin's
    messageTrackDetail)."""
    tracks = []
    for group in await topic_consumers(admin, message.topic):
        kind, desc = "UNKNOWN", None
        try:
            connection = await consumer_connection(admin, group)
        except ClientError as exc:
            if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
                kind = "NOT_ONLINE"
            desc = f"CODE:{exc.code} DESC:{exc.remark}"
        else:
            if connection.get("consumeType") == "CONSUME_ACTIVELY":
                kind = "PULL"
            elif connection.get("consumeType") == "CONSUME_PASSIVELY":
                kind = "CONSUMED" if await _consumed(admin, message, group) else "NOT_CONSUME_YET"
                sub = (connection.get("subscriptionTable") or {}).get(message.topic)
                tags = set(sub.get("tagsSet") or []) if sub else {"*"}
                if kind == "CONSUMED" and tags and "*" not in tags and message.tags not in tags:
                    kind = "CONSUMED_BUT_FILTERED"
        tracks.append(MessageTrack(group, kind, desc))
    return tracks


async def message_track(admin: Admin, message: ReceivedMessage) -> list[str]:
    """The MessageTrack lines mqadmin prints: NOT_ONLINE, PULL, CONSUMED,
    CONSUMED_BUT_FILTERED or NOT_CONSUME_YET for each group."""
    return [str(track) for track in await message_tracks(admin, message)]


async def _consumed(admin: Admin, message: ReceivedMessage, group: str) -> bool:
    """Whether the group's committed offset of the message's queue is past it."""
    stats = await admin.consume_stats(group)
    return any(
        (p.queue.topic, p.queue.queue_id) == (message.queue.topic, message.queue.queue_id)
        and p.consumer_offset > message.queue_offset
        for p in stats.queues
    )

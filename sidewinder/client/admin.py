"""The admin API mqadmin is built on: topics, routes, the cluster, consumer progress and lag.

async with Admin("127.0.0.1:9876") as admin:
    await admin.create_topic("Orders", queues=8)
    for row in await admin.consumer_progress("billing"):
        print(row.queue, row.lag)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Self

from sidewinder.client.pulling import ReceivedMessage, pull
from sidewinder.client.route_cache import (
    MASTER_ID,
    ClientError,
    MessageQueue,
    RouteCache,
    check_reply,
)
from sidewinder.protocol import body
from sidewinder.protocol.acl import request_hook
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    ConsumeStatsRequestHeader,
    CreateTopicRequestHeader,
    QueryMessageRequestHeader,
    TopicHeader,
)
from sidewinder.protocol.record import MessageRecord, decode_record
from sidewinder.protocol.subscription import Subscription
from sidewinder.remoting.client import RemotingClient
from sidewinder.remoting.tls import TlsOption

TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"  # MixAll.UNIQUE_MSG_QUERY_FLAG: look up by message id
# How long a lookup by queue waits for a route the name servers do not have yet: a broker
# registers a topic it auto-created within milliseconds.
ROUTE_WAIT_S = 3.0


@dataclass(frozen=True)
class QueueProgress:
    queue: MessageQueue
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def lag(self) -> int:
        return max(self.broker_offset - self.consumer_offset, 0)


@dataclass(frozen=True)
class ConsumeStats:
    queues: list[QueueProgress]
    consume_tps: float


class Admin:
    def __init__(
        self,
        namesrv_addr: str,
        *,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: TlsOption = None,
    ) -> None:
        """`access_key`/`secret_key`: sign every request for a broker with ACL on; `tls`:
        connect with TLS (True, a TlsConfig or an ssl.SSLContext)."""
        self.remoting = RemotingClient(before_request=request_hook(access_key, secret_key), tls=tls)
        self.routes = RouteCache(self.remoting, [a for a in namesrv_addr.split(";") if a])

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connections; `async with Admin(...)` does it on leaving the block."""
        await self.remoting.close()

    async def cluster_info(self) -> dict[str, Any]:
        reply = await self.routes.ask_name_server(
            RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
        )
        check_reply(reply)
        info = body.loads(reply.body_bytes)
        for broker in info.get("brokerAddrTable", {}).values():
            broker["brokerAddrs"] = {int(k): v for k, v in broker["brokerAddrs"].items()}
        return dict(info)

    async def masters(self, cluster: str) -> dict[str, str]:
        """brokerName -> master address of every broker in `cluster`."""
        info = await self.cluster_info()
        names = info.get("clusterAddrTable", {}).get(cluster)
        if not names:
            raise ClientError(ResponseCode.SYSTEM_ERROR, f"no cluster named {cluster}")
        table = info["brokerAddrTable"]
        return {
            n: table[n]["brokerAddrs"][MASTER_ID]
            for n in names
            if MASTER_ID in table[n]["brokerAddrs"]
        }

    async def create_topic(
        self,
        topic: str,
        *,
        queues: int = 8,
        cluster: str = "DefaultCluster",
        perm: int = 6,
        order: bool = False,
        attributes: str | None = None,
    ) -> list[str]:
        """UPDATE_AND_CREATE_TOPIC on every master of the cluster; their addresses.
        `attributes`: RocketMQ 5's modification, "+message.type=FIFO,-key"."""
        header = CreateTopicRequestHeader(
            topic, "TBW102", queues, queues, perm, "SINGLE_TAG", 0, order, attributes
        )
        masters = await self.masters(cluster)
        for addr in masters.values():
            reply = await self.remoting.invoke(
                addr,
                RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext()),
                5,
            )
            check_reply(reply)
        return sorted(masters.values())

    async def delete_topic(self, topic: str, *, cluster: str = "DefaultCluster") -> None:
        for addr in (await self.masters(cluster)).values():
            reply = await self.remoting.invoke(
                addr,
                RemotingCommand.request(
                    RequestCode.DELETE_TOPIC_IN_BROKER, TopicHeader(topic).to_ext()
                ),
                5,
            )
            check_reply(reply)
        check_reply(
            await self.routes.ask_name_server(
                RemotingCommand.request(
                    RequestCode.DELETE_TOPIC_IN_NAMESRV, TopicHeader(topic).to_ext()
                )
            )
        )

    async def topics(self) -> list[str]:
        reply = await self.routes.ask_name_server(
            RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        )
        check_reply(reply)
        return sorted(body.loads(reply.body_bytes).get("topicList", []))

    async def route(self, topic: str) -> dict[str, Any]:
        reply = await self.routes.ask_name_server(
            RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        )
        check_reply(reply)
        return dict(body.loads(reply.body_bytes))

    async def broker_runtime(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the broker's statistics table."""
        reply = await _ask_broker(self, broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO, None)
        return dict(body.loads(reply.body_bytes).get("table", {}))

    async def topic_status(self, topic: str) -> list[tuple[MessageQueue, int, int, int]]:
        """(queue, min offset, max offset, last update) of every queue of `topic`."""
        route = await self.route(topic)
        rows = []
        for broker in route.get("brokerDatas", []):
            addr = {int(k): v for k, v in broker["brokerAddrs"].items()}.get(MASTER_ID)
            if addr is None:
                continue
            reply = await _ask_broker(
                self, addr, RequestCode.GET_TOPIC_STATS_INFO, TopicHeader(topic).to_ext()
            )
            for mq, stat in body.object_keyed_pairs(reply.body_bytes):
                rows.append(
                    (
                        MessageQueue(mq["topic"], mq["brokerName"], int(mq["queueId"])),
                        int(stat["minOffset"]),
                        int(stat["maxOffset"]),
                        int(stat.get("lastUpdateTimestamp", 0)),
                    )
                )
        return sorted(rows)

    async def query_by_key(self, topic: str, key: str, max_num: int = 64) -> list[bytes]:
        """QUERY_MESSAGE on every master serving `topic`: the stored records with that key."""
        header = QueryMessageRequestHeader(topic, key, max_num, 0, 2**63 - 1)
        found = []
        route = await self.route(topic)
        for broker in route.get("brokerDatas", []):
            addr = {int(k): v for k, v in broker["brokerAddrs"].items()}.get(MASTER_ID)
            if addr is None:
                continue
            reply = await self.remoting.invoke(
                addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE, header.to_ext()), 5
            )
            if reply.code == ResponseCode.SUCCESS and reply.body:
                found.append(reply.body_bytes)
        return found

    async def query_messages(
        self,
        topic: str,
        key: str,
        *,
        unique: bool = False,
        max_num: int = 32,
        end_ms: int = 2**63 - 1,
    ) -> list[ReceivedMessage]:
        """QUERY_MESSAGE at every master serving `topic`: the messages with that key, or with
        that message id when `unique` (MQAdminImpl.queryMessage: the index answers by hash,
        so each is checked); ClientError NO_MESSAGE when none is."""
        header = QueryMessageRequestHeader(topic, key, max_num, 0, end_ms).to_ext()
        if unique:
            header[UNIQUE_KEY_QUERY] = "true"
        found: list[ReceivedMessage] = []
        for broker in (await self.route(topic)).get("brokerDatas", []):
            name = broker["brokerName"]
            addr = {int(k): v for k, v in broker["brokerAddrs"].items()}.get(MASTER_ID)
            if addr is None:
                continue
            request = RemotingCommand.request(RequestCode.QUERY_MESSAGE, header)
            reply = await self.remoting.invoke(addr, request, 5)
            if reply.code != ResponseCode.SUCCESS or not reply.body:
                continue
            for record in stored_records(reply.body_bytes):
                queue = MessageQueue(record.topic, name, record.queue_id)
                message = ReceivedMessage.of(queue, record)
                if (message.msg_id == key) if unique else (key in message.keys):
                    found.append(message)
        if not found:
            raise ClientError(
                ResponseCode.NO_MESSAGE, "query message by key finished, but no message."
            )
        return found

    async def update_group(
        self,
        group: str,
        *,
        cluster: str = "DefaultCluster",
        settings: dict[str, Any] | None = None,
        broker: str | None = None,
    ) -> list[str]:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with RocketMQ's defaults, overridden by
        `settings` (SubscriptionGroupConfig's JSON fields), on every master of the cluster or
        on `broker` alone; the addresses."""
        config: dict[str, Any] = {
            "brokerId": 0,
            "consumeBroadcastEnable": True,
            "consumeEnable": True,
            "consumeFromMinEnable": True,
            "groupName": group,
            "notifyConsumerIdsChangedEnable": True,
            "retryMaxTimes": 16,
            "retryQueueNums": 1,
            "whichBrokerWhenConsumeSlowly": 1,
        } | (settings or {})
        masters = {"": broker} if broker else await self.masters(cluster)
        for addr in masters.values():
            reply = await self.remoting.invoke(
                addr,
                RemotingCommand.request(
                    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                    None,
                    body.dumps(config).encode(),
                ),
                5,
            )
            check_reply(reply)
        return sorted(masters.values())

    async def view_message(self, broker_addr: str, phy_offset: int) -> bytes:
        """VIEW_MESSAGE_BY_ID: the stored record at a CommitLog offset."""
        reply = await _ask_broker(
            self, broker_addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(phy_offset)}
        )
        return reply.body_bytes

    async def broker_config(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: the broker's effective settings (a Java properties text)."""
        reply = await _ask_broker(self, broker_addr, RequestCode.GET_BROKER_CONFIG, None)
        config = {}
        for line in reply.body_bytes.decode().splitlines():
            key, sep, value = line.partition("=")
            if sep and not key.lstrip().startswith("#"):
                config[key.strip()] = value.strip()
        return config

    async def group_config(self, broker_addr: str, group: str) -> dict[str, Any]:
        """GET_SUBSCRIPTIONGROUP_CONFIG (RocketMQ 5): one group's config on one broker."""
        reply = await self.ask_broker(
            broker_addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group}
        )
        config: dict[str, Any] = body.loads(reply.body_bytes)
        return config

    async def set_message_request_mode(
        self, broker_addr: str, topic: str, group: str, mode: str, pop_share_queue_num: int = 0
    ) -> None:
        """SET_MESSAGE_REQUEST_MODE (RocketMQ 5): the group pulls or pops the topic."""
        value = {
            "consumerGroup": group,
            "mode": mode,
            "popShareQueueNum": pop_share_queue_num,
            "topic": topic,
        }
        await self.ask_broker(
            broker_addr, RequestCode.SET_MESSAGE_REQUEST_MODE, None, body.dumps(value).encode()
        )

    async def ask_broker(
        self, broker_addr: str, code: int, ext: dict[str, str] | None = None, payload: bytes = b""
    ) -> RemotingCommand:
        """Any admin request to one broker; ClientError with its code and remark unless it
        succeeds (the maintenance codes, UPDATE_BROKER_CONFIG, QUERY_CONSUME_QUEUE, ...)."""
        request = RemotingCommand.request(code, ext, payload or None)
        reply = await self.remoting.invoke(broker_addr, request, 30)
        check_reply(reply)
        return reply

    async def ask_name_server(
        self, code: int, payload: bytes = b"", ext: dict[str, str] | None = None
    ) -> RemotingCommand:
        reply = await self.routes.ask_name_server(
            RemotingCommand.request(code, ext, payload or None)
        )
        check_reply(reply)
        return reply

    async def ask_each_name_server(
        self, code: int, ext: dict[str, str] | None = None
    ) -> dict[str, RemotingCommand]:
        """One request to every name server of the list (what each holds is its own: KV
        config, write permissions); their replies by address, ClientError at the first that
        refuses."""
        replies = {}
        for addr in self.routes.namesrv_addrs:
            reply = await self.remoting.invoke(addr, RemotingCommand.request(code, ext), 5)
            check_reply(reply)
            replies[addr] = reply
        return replies

    async def message_at(self, queue: MessageQueue, offset: int) -> ReceivedMessage | None:
        """The message at `offset` of one queue (one PULL_MESSAGE, as mqadmin's tools group).
        A queue from a send that just auto-created its topic may wait a moment for the route."""
        addr = await self.routes.wait_broker_addr(queue, ROUTE_WAIT_S)
        if addr is None:
            raise ClientError(
                ResponseCode.TOPIC_NOT_EXIST, f"no broker {queue.broker_name} for {queue.topic}"
            )
        result = await pull(
            self.remoting,
            addr,
            TOOLS_CONSUMER_GROUP,
            queue,
            offset,
            Subscription.of(queue.topic, "*"),
            batch=1,
            suspend_s=None,
        )
        found = [m for m in result.messages if m.queue_offset == offset]
        return found[0] if found else None

    async def consumer_progress(self, group: str, topic: str | None = None) -> list[QueueProgress]:
        """Broker and consumer offsets of every queue the group consumes, with the lag."""
        return (await self.consume_stats(group, topic)).queues

    async def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """GET_CONSUME_STATS at every master: the queues' offsets and the group's consume TPS
        (summed over the brokers, as DefaultMQAdminExt.examineConsumeStats sums it)."""
        info = await self.cluster_info()
        rows: list[QueueProgress] = []
        tps = 0.0
        for broker in info.get("brokerAddrTable", {}).values():
            addr = broker["brokerAddrs"].get(MASTER_ID)
            if addr is None:
                continue
            try:
                queues, broker_tps = await self.consume_stats_at(addr, group, topic)
            except ClientError:
                continue
            rows += queues
            tps += broker_tps
        return ConsumeStats(sorted(rows, key=lambda r: r.queue), tps)

    async def consume_stats_at(
        self, broker_addr: str, group: str, topic: str | None = None
    ) -> tuple[list[QueueProgress], float]:
        """GET_CONSUME_STATS at one broker: its queues' offsets and the consume TPS."""
        header = ConsumeStatsRequestHeader(group, topic)
        reply = await self.remoting.invoke(
            broker_addr,
            RemotingCommand.request(RequestCode.GET_CONSUME_STATS, header.to_ext()),
            5,
        )
        check_reply(reply)
        rows = [
            QueueProgress(
                MessageQueue(mq["topic"], mq["brokerName"], int(mq["queueId"])),
                int(offsets["brokerOffset"]),
                int(offsets["consumerOffset"]),
                int(offsets.get("lastTimestamp", 0)),
            )
            for mq, offsets in body.object_keyed_pairs(reply.body_bytes)
        ]
        found = re.search(rb'"consumeTps":(-?[\d.Ee+-]+)', reply.body_bytes)
        return rows, float(found.group(1)) if found else 0.0


def stored_records(data: bytes) -> list[MessageRecord]:
    """The whole records of a QUERY_MESSAGE or VIEW_MESSAGE_BY_ID body."""
    records, at = [], 0
    while at < len(data):
        record = decode_record(data, at)
        if not isinstance(record, MessageRecord):
            break
        records.append(record)
        at += record.total_size
    return records


async def _ask_broker(admin: Admin, addr: str, code: int, ext: dict[str, str] | None) -> Any:
    reply = await admin.remoting.invoke(addr, RemotingCommand.request(code, ext), 5)
    check_reply(reply)
    return reply

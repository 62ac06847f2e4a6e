"""The queues a topic can be consumed from, cluster-wide, as the name servers route it (RocketMQ
5's TopicRouteInfoManager.getTopicSubscribeInfo): every readable queue of every broker.

    source = TopicSubscribeInfo(config, outbound)
    queues = await source.queues("Orders")  # [("broker-a", 0), ...], or None without a route
"""

from __future__ import annotations

import structlog

from sidewinder.broker.config import PERM_READ, BrokerConfig
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import GetRouteInfoRequestHeader
from sidewinder.remoting.client import RemotingClient
from sidewinder.remoting.connection import RemotingError

log = structlog.get_logger(__name__)

QueueRef = tuple[str, int]  # brokerName, queueId


class TopicSubscribeInfo:
    def __init__(self, config: BrokerConfig, client: RemotingClient) -> None:
        self.config = config
        self.client = client

    async def queues(self, topic: str) -> list[QueueRef] | None:
        """Asks the name servers in turn; None when none knows the topic or none answers."""
        header = GetRouteInfoRequestHeader(topic).to_ext()
        for addr in self.config.namesrv_addrs:
            request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, header)
            try:
                reply = await self.client.invoke(addr, request, 3.0)
            except (RemotingError, OSError) as exc:
                log.warning("broker.route_query_failed", namesrv=addr, topic=topic, error=str(exc))
                continue
            if reply.code != ResponseCode.SUCCESS or not reply.body:
                return None
            try:
                route = body.loads(reply.body_bytes)
                return [
                    (str(q["brokerName"]), n)
                    for q in route.get("queueDatas") or []
                    if int(q.get("perm", 0)) & PERM_READ
                    for n in range(int(q.get("readQueueNums", 0)))
                ]
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                log.warning("broker.route_unreadable", namesrv=addr, topic=topic, error=str(exc))
        return None

"""RocketMQ 5's server-side load balancing (QueryAssignmentProcessor): QUERY_ASSIGNMENT (400),
SET_MESSAGE_REQUEST_MODE (401), and GET_ALL_MESSAGE_REQUEST_MODE (402, an admin code).

    assignment = AssignmentProcessor(config, modes, clients, routes, modes_saved=app.save_modes)
    table.register(assignment, R.QUERY_ASSIGNMENT, R.SET_MESSAGE_REQUEST_MODE)

A PULL group's client gets what its own strategy (AVG, AVG_BY_CIRCLE) gives it among the group's
clients; a POP group's client gets every queue as queue id -1, unless popShareQueueNum makes
clients share a few.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sidewinder.broker.clients import Clients
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.processors.replies import json_body, json_reply, message_queue
from sidewinder.broker.request_modes import RequestModes, request_mode
from sidewinder.broker.topic_route import QueueRef, TopicSubscribeInfo
from sidewinder.broker.topics import RETRY_GROUP_TOPIC_PREFIX
from sidewinder.protocol.body import Shape
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import BodyError, NoPermission
from sidewinder.remoting.dispatch import RequestContext

# Java's MessageQueue order: topic, brokerName, queueId (one topic here).
Allocate = Callable[[list[QueueRef], list[str], str], list[QueueRef]]
SET_MODE_SHAPE: Shape = {"topic": str, "consumerGroup": str, "mode": str, "popShareQueueNum": int}
QUERY_SHAPE: Shape = {"topic": str, "consumerGroup": str, "clientId": str, "strategyName": str}


def allocate_averagely(queues: list[QueueRef], clients: list[str], me: str) -> list[QueueRef]:
    """AllocateMessageQueueAveragely: contiguous runs, the first `len % clients` one longer."""
    if me not in clients:
        return []
    index, count = clients.index(me), len(queues)
    mod = count % len(clients)
    longer = bool(mod) and index < mod
    size = 1 if count <= len(clients) else count // len(clients) + longer
    start = index * size if longer else index * size + mod
    return [queues[(start + i) % count] for i in range(max(min(size, count - start), 0))]


def allocate_by_circle(queues: list[QueueRef], clients: list[str], me: str) -> list[QueueRef]:
    """AllocateMessageQueueAveragelyByCircle: every len(clients)-th queue from the client's."""
    if me not in clients:
        return []
    index = clients.index(me)
    return [q for n, q in enumerate(queues) if n % len(clients) == index]


STRATEGIES: dict[str, Allocate] = {"AVG": allocate_averagely, "AVG_BY_CIRCLE": allocate_by_circle}


def allocate_for_pop(
    strategy: Allocate, queues: list[QueueRef], clients: list[str], me: str, share: int
) -> list[QueueRef]:
    """QueryAssignmentProcessor.allocate4Pop: all queues (id -1) unless `share` clients follow."""
    if share <= 0 or share >= len(clients) - 1:
        return sorted({(broker, -1) for broker, _ in queues})
    if len(clients) > len(queues):
        return [queues[clients.index(me) % len(queues)]] if me in clients else []
    result = strategy(queues, clients, me)
    if me in clients:
        index = clients.index(me)
        for step in range(1, share + 1):
            result += strategy(queues, clients, clients[(index + step) % len(clients)])
    return result


def _require(data: dict[str, Any], what: str, *fields: str) -> None:
    """RocketMQ 5.3.2 answers a body without these with a NullPointerException (SYSTEM_ERROR);
    the same code here, with a remark that names the field."""
    for field in fields:
        if not data.get(field):
            raise BodyError(f"the body is not a {what}: no {field}")


class AssignmentProcessor:
    def __init__(
        self,
        config: BrokerConfig,
        modes: RequestModes,
        clients: Clients,
        routes: TopicSubscribeInfo,
        *,
        modes_saved: Callable[[], Awaitable[None]],
    ) -> None:
        self.config = config
        self.modes = modes
        self.clients = clients
        self.routes = routes
        self.modes_saved = modes_saved

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if request.code == RequestCode.SET_MESSAGE_REQUEST_MODE:
            return await self.set_mode(request)
        return await self.query_assignment(request)

    async def set_mode(self, request: RemotingCommand) -> RemotingCommand:
        data = json_body(request, "SetMessageRequestModeRequestBody", SET_MODE_SHAPE)
        _require(data, "SetMessageRequestModeRequestBody", "topic", "consumerGroup")
        if str(data["topic"]).startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise NoPermission("retry topic is not allowed to set mode")
        self.modes.set(data)
        await self.modes_saved()
        return request.reply(ResponseCode.SUCCESS)

    async def all_modes(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return json_reply(request, self.modes.to_json())

    async def query_assignment(self, request: RemotingCommand) -> RemotingCommand:
        data = json_body(request, "QueryAssignmentRequestBody", QUERY_SHAPE)
        _require(data, "QueryAssignmentRequestBody", "topic", "consumerGroup")
        topic, group = str(data.get("topic") or ""), str(data.get("consumerGroup") or "")
        mode = self.modes.get(topic, group) or self._default_mode(topic, group)
        queues = await self._assign(data, topic, group, mode)
        if queues is None:  # RocketMQ leaves the set out: the client keeps what it had
            return json_reply(request, {})
        assignments = [
            {"messageQueue": message_queue(broker, topic, qid), "mode": mode["mode"]}
            for broker, qid in queues
        ]
        return json_reply(request, {"messageQueueAssignments": assignments})

    def _default_mode(self, topic: str, group: str) -> dict[str, Any]:
        pull = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)  # retry topics are always pulled
        kind = "PULL" if pull else self.config.default_message_request_mode
        share = self.config.default_pop_share_queue_num if kind == "POP" else 0
        return request_mode(
            {"topic": topic, "consumerGroup": group, "mode": kind, "popShareQueueNum": share}
        )

    async def _assign(
        self, data: dict[str, Any], topic: str, group: str, mode: dict[str, Any]
    ) -> list[QueueRef] | None:
        queues = await self.routes.queues(topic)
        if queues is None:
            return None
        if (
            data.get("messageModel") == "BROADCASTING"
            or not self.config.server_load_balancer_enable
        ):
            return queues
        found = self.clients.consumers.get(group)
        strategy = STRATEGIES.get(str(data.get("strategyName")))
        me = str(data.get("clientId") or "")
        if found is None or strategy is None or not queues or not me:
            return None
        members = sorted(found.client_ids())
        if not members:
            return None
        ordered = sorted(queues)
        if mode["mode"] == "POP":
            return allocate_for_pop(strategy, ordered, members, me, mode["popShareQueueNum"])
        return strategy(ordered, members, me)

"""apache.rocketmq.v2.MessagingService, served over remoting to the brokers: what RocketMQ's
proxy does in cluster mode (its *Activity classes), transport aside.

Each RPC takes the request message and the caller (the x-mq-* metadata) and gives the
response message; refusals are in-band v2 statuses, as RocketMQ's proxy answers them. The
gRPC transport (grpc_server.py) is one way in; nothing here knows it.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import structlog

from sidewinder.client.pop_client import EMPTY_POP, REPLY_MARGIN_S, popped_messages
from sidewinder.client.route_cache import ClientError, MessageQueue, RouteCache, TopicRoute
from sidewinder.protocol.body import loads
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import (
    SEND_V2_NAMES,
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from sidewinder.protocol.message import encode_properties, java_string_hash
from sidewinder.protocol.pop import (
    POLLING_FULL,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ConsumeInitMode,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    PopRequestCode,
)
from sidewinder.protocol.recall import RecallHandle, RecallHandleError, RecallMessageRequestHeader
from sidewinder.protocol.record import MessageRecord, decode_record
from sidewinder.protocol.subscription import Subscription
from sidewinder.proxy import grpc_protocol as v2
from sidewinder.proxy.auth import Needed, sign_as_caller
from sidewinder.proxy.client_calls import CLIENT_CALL_CODES, ClientCalls
from sidewinder.proxy.clients import ClientRegistry, GrpcClient
from sidewinder.proxy.convert import (
    BadMessage,
    TransactionId,
    check_group,
    check_topic,
    incoming,
    message_type_of,
    outgoing,
)
from sidewinder.proxy.renewal import ReceiptRenewals
from sidewinder.remoting.client import RemotingClient
from sidewinder.remoting.connection import RemotingError
from sidewinder.remoting.dispatch import ProcessorTable

log = structlog.get_logger(__name__)

AUTO_CREATE_TOPIC = "TBW102"
MIN_LONG_POLLING_MS = 5_000  # grpcClientConsumerMinLongPollingTimeoutMillis
MAX_LONG_POLLING_MS = 20_000  # grpcClientConsumerMaxLongPollingTimeoutMillis
MAX_POP_BATCH = 32  # a larger batch is cut to it, as RocketMQ's proxy cuts it
DEFAULT_REQUEST_TIMEOUT_MS = 3_000  # a client's request timeout when its settings name none
DEADLINE_MARGIN_MS = 300  # what a pop's answer needs to reach the client before its deadline
MAX_INVISIBLE_MS = 12 * 3600 * 1000  # RocketMQ's maxInvisibleTimeMills
MIN_INVISIBLE_MS = 10_000  # minInvisibleTimeMillsForRecv (renewals may be shorter)
SEND_TIMEOUT_S = 3.0
CALL_TIMEOUT_S = 5.0
PULL_FLAG_SUBSCRIPTION = 0x4  # PullSysFlag: the request carries its subscription
TOPIC_CONFIG_TTL_S = 30.0
MESSAGE_TYPE_KEY = "message.type"  # the topic attribute
# What a route accepts, by the topic's message type (RouteActivity.parseTopicMessageType).
ACCEPTED_TYPES: dict[str, list[int]] = {
    "NORMAL": [v2.MessageType.NORMAL],
    "FIFO": [v2.MessageType.FIFO],
    "DELAY": [v2.MessageType.DELAY],
    "TRANSACTION": [v2.MessageType.TRANSACTION],
    "MIXED": [
        v2.MessageType.NORMAL,
        v2.MessageType.FIFO,
        v2.MessageType.DELAY,
        v2.MessageType.TRANSACTION,
    ],
    "UNSPECIFIED": [v2.MessageType.MESSAGE_TYPE_UNSPECIFIED],
}
COMMIT, ROLLBACK = 0x8, 0xC  # MessageSysFlag.TRANSACTION_{COMMIT,ROLLBACK}_TYPE
# Remoting refusals as v2 codes (the proxy's ProxyException / ResponseCode mapping).
_CODES: dict[int, str] = {
    ResponseCode.TOPIC_NOT_EXIST: "TOPIC_NOT_FOUND",
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: "CONSUMER_GROUP_NOT_FOUND",
    ResponseCode.NO_PERMISSION: "FORBIDDEN",
    ResponseCode.SYSTEM_BUSY: "TOO_MANY_REQUESTS",
    ResponseCode.MESSAGE_ILLEGAL: "BAD_REQUEST",
    ResponseCode.FLUSH_DISK_TIMEOUT: "MASTER_PERSISTENCE_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "SLAVE_PERSISTENCE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "HA_NOT_AVAILABLE",
}


ACL_EXCEPTION = "AclException"  # what a broker's ACL refusal remark names


def status(code: str = "OK", message: str = "OK") -> Any:
    return v2.Status(code=v2.Code.Value(code), message=message)


class ExpiredHandle(Exception):
    """A receipt handle whose invisible time has run out."""


class TooManyPolls(Exception):
    """A pop the broker answered POLLING_FULL: its held pops are at their limit."""


def refusal(exc: Exception) -> Any:
    """The v2 status of a failed remoting call."""
    if isinstance(exc, TooManyPolls):
        return status("TOO_MANY_REQUESTS", str(exc))
    if isinstance(exc, ExpiredHandle):
        return status("INVALID_RECEIPT_HANDLE", str(exc))
    if isinstance(exc, ClientError):
        if ACL_EXCEPTION in (exc.remark or ""):  # the broker's ACL said no (SYSTEM_ERROR)
            return status("FORBIDDEN", exc.remark)
        return status(_CODES.get(exc.code, "INTERNAL_SERVER_ERROR"), exc.remark or str(exc))
    if isinstance(exc, BadMessage):
        return status(exc.code, str(exc))
    if isinstance(exc, (RemotingError, OSError, asyncio.TimeoutError)):
        return status("PROXY_TIMEOUT", f"the broker did not answer: {exc}")
    return status("INTERNAL_SERVER_ERROR", str(exc))


POLLING_CODE_SINCE_VERSION = "5.0.3"  # ILLEGAL_POLLING_TIME_INTRODUCED_CLIENT_VERSION


@dataclass(frozen=True)
class Caller:
    """Who calls: the x-mq-* metadata of the call."""

    client_id: str
    language: str = ""
    version: str = ""
    namespace: str = ""
    remaining_ms: int | None = None  # until the call's deadline, when it has one


def _check(reply: RemotingCommand) -> None:
    if reply.code != ResponseCode.SUCCESS:
        raise ClientError(reply.code, reply.remark or "")


def _duration_ms(value: Any) -> int:
    return int(value.ToMilliseconds())


class MessagingActivity:
    """The RPCs of MessagingService. `endpoints`: the address clients reach this front at,
    which routes name as every broker's (clients talk only to the front)."""

    def __init__(
        self,
        namesrv_addrs: list[str],
        endpoints: tuple[str, int],
        secret_of: Callable[[str], str | None] | None = None,
        permit: Callable[[str, Needed, str], None] | None = None,
    ) -> None:
        """With ACL on: `secret_of` gives an access key's secret, and `permit(access_key,
        needed, client address)` raises Forbidden unless the account may (None: no ACL)."""
        table = ProcessorTable()
        self.remoting = RemotingClient(table, before_request=sign_as_caller)
        self.secret_of = secret_of
        self.permit = permit
        self.routes = RouteCache(self.remoting, namesrv_addrs)
        self.clients = ClientRegistry(self.remoting, self.routes)
        self.client_calls = ClientCalls(self.clients, self.broker_name_at)
        table.register(self.client_calls, *CLIENT_CALL_CODES)
        self.endpoints = endpoints
        self._turn = itertools.count()
        self._topic_types: dict[str, tuple[str, float]] = {}  # topic -> (type, when asked)
        self._group_configs: dict[str, tuple[dict[str, Any], float]] = {}
        self.renewals = ReceiptRenewals(self.change_invisible)

    async def close(self) -> None:
        await self.remoting.close()

    # -- routes ------------------------------------------------------------------------------
    def _endpoints(self, asked: Any) -> Any:
        """Where a client reaches every broker: the front, at the address it asked on (as
        RocketMQ's proxy answers), else the front's own."""
        if asked is not None and asked.addresses:
            return asked
        host, port = self.endpoints
        return v2.Endpoints(
            scheme=v2.AddressScheme.IPv4, addresses=[v2.Address(host=host, port=port)]
        )

    def _broker(self, name: str, asked: Any) -> Any:
        return v2.Broker(name=name, id=0, endpoints=self._endpoints(asked))

    async def _route(self, topic: str) -> TopicRoute:
        check_topic(topic)
        route = await self.routes.route(topic)
        if route is None:
            raise ClientError(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} not found")
        return route

    async def query_route(self, request: Any, caller: Caller) -> Any:
        try:
            route = await self._route(request.topic.name)
        except Exception as exc:
            return v2.QueryRouteResponse(status=refusal(exc))
        accepted = ACCEPTED_TYPES[await self.topic_message_type(request.topic.name)]
        reads = set(route.read_queues)
        writes = set(route.write_queues)
        queues = []
        for queue in sorted(reads | writes):
            permission = (
                v2.Permission.READ_WRITE
                if queue in reads and queue in writes
                else v2.Permission.READ
                if queue in reads
                else v2.Permission.WRITE
            )
            queues.append(
                v2.MessageQueue(
                    topic=v2.Resource(name=queue.topic),
                    id=queue.queue_id,
                    permission=permission,
                    broker=self._broker(queue.broker_name, request.endpoints),
                    accept_message_types=accepted,
                )
            )
        return v2.QueryRouteResponse(status=status(), message_queues=queues)

    async def query_assignment(self, request: Any, caller: Caller) -> Any:
        """One queue of id -1 per readable broker: the broker assigns messages (POP)."""
        try:
            route = await self._route(request.topic.name)
        except Exception as exc:
            return v2.QueryAssignmentResponse(status=refusal(exc))
        readable = [q for q in route.read_queues if route.master(q.broker_name)]
        if not readable:
            return v2.QueryAssignmentResponse(
                status=status("FORBIDDEN", f"no readable queue of topic {request.topic.name}")
            )
        config = await self.group_config(request.group.name, request.topic.name)
        if config.get("consumeMessageOrderly"):
            # FIFO: each queue on its own, so a queue's order holds (RouteActivity).
            targets = sorted((q.broker_name, q.queue_id) for q in readable)
        else:
            targets = [(name, -1) for name in sorted({q.broker_name for q in readable})]
        assignments = [
            v2.Assignment(
                message_queue=v2.MessageQueue(
                    topic=v2.Resource(name=request.topic.name),
                    id=queue_id,
                    permission=v2.Permission.READ_WRITE,
                    broker=self._broker(name, request.endpoints),
                )
            )
            for name, queue_id in targets
        ]
        return v2.QueryAssignmentResponse(status=status(), assignments=assignments)

    async def _master(self, topic: str, broker_name: str) -> str:
        """The master of broker `broker_name` in `topic`'s route."""
        addr = (await self._route(topic)).master(broker_name)
        if addr is None:
            raise ClientError(ResponseCode.SERVICE_NOT_AVAILABLE, f"no master for {broker_name}")
        return addr

    async def group_config(self, group: str, topic: str) -> dict[str, Any]:
        """A consumer group's config from a master of `topic` (GET_SUBSCRIPTIONGROUP_CONFIG),
        kept TOPIC_CONFIG_TTL_S; {} when no broker has it."""
        cached = self._group_configs.get(group)
        now = time.monotonic()
        if cached is not None and now - cached[1] < TOPIC_CONFIG_TTL_S:
            return cached[0]
        try:
            route = await self.routes.route(topic)
        except Exception as exc:
            log.warning("proxy.route_failed", topic=topic, error=str(exc))
            route = None
        for name in sorted(route.brokers) if route is not None else []:
            addr = route.master(name) if route is not None else None
            if addr is None:
                continue
            command = RemotingCommand.request(
                RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group}
            )
            try:
                reply = await self.remoting.invoke(addr, command, CALL_TIMEOUT_S)
            except (RemotingError, OSError) as exc:
                log.warning("proxy.group_config_failed", broker=addr, error=str(exc))
                continue
            if reply.code == ResponseCode.SUCCESS:
                value = loads(reply.body_bytes)
                config = value if isinstance(value, dict) else {}
                self._group_configs[group] = (config, now)
                return config
        return cached[0] if cached is not None else {}

    async def topic_message_type(self, topic: str) -> str:
        """The topic's `message.type` (NORMAL unless set; MIXED takes every type), from a
        broker's GET_TOPIC_CONFIG, kept TOPIC_CONFIG_TTL_S; UNSPECIFIED when none knows it."""
        cached = self._topic_types.get(topic)
        now = time.monotonic()
        if cached is not None and now - cached[1] < TOPIC_CONFIG_TTL_S:
            return cached[0]
        kind = "UNSPECIFIED"
        answered = False  # a broker answered (a topic it lacks too): worth keeping
        route = await self.routes.route(topic)
        for name in sorted(route.brokers) if route is not None else []:
            addr = route.master(name) if route is not None else None
            if addr is None:
                continue
            command = RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, {"topic": topic})
            try:
                reply = await self.remoting.invoke(addr, command, CALL_TIMEOUT_S)
            except (RemotingError, OSError) as exc:
                log.warning("proxy.topic_config_failed", broker=addr, error=str(exc))
                continue
            answered = answered or reply.code in (
                ResponseCode.SUCCESS,
                ResponseCode.TOPIC_NOT_EXIST,
            )
            if reply.code == ResponseCode.SUCCESS:
                value = loads(reply.body_bytes)
                attributes = value.get("attributes") or {}
                named = value.get("topicMessageType") or attributes.get(MESSAGE_TYPE_KEY)
                kind = str(named or "NORMAL").upper()
                break
        if kind not in ACCEPTED_TYPES:
            kind = "UNSPECIFIED"
        if answered:
            self._topic_types[topic] = (kind, now)
        elif cached is not None:
            return cached[0]  # no broker answered: the last good answer stands
        return kind

    async def housekeeping(self, now_ms: int, expire: bool) -> None:
        """Renew the handles push consumers still work on; with `expire`, forget silent
        clients and bring their messages back."""
        await self.renewals.renew_due(now_ms)
        if expire:
            for client in await self.clients.expire(time.monotonic()):
                await self.renewals.release(client.client_id)

    async def broker_name_at(self, topic: str, addr: str) -> str:
        """The name of the broker at `addr` (a master of `topic`'s route)."""
        route = await self.routes.route(topic)
        if route is not None:
            for name in route.brokers:
                if route.master(name) == addr:
                    return name
            if route.brokers:
                return sorted(route.brokers)[0]
        return ""

    # -- clients -----------------------------------------------------------------------------
    async def heartbeat(self, request: Any, caller: Caller) -> Any:
        client = self.clients.seen(caller.client_id)
        if client is None:
            return v2.HeartbeatResponse(
                status=status("UNRECOGNIZED_CLIENT_TYPE", "no settings from this client yet")
            )
        await self.clients.heartbeat(client)
        return v2.HeartbeatResponse(status=status())

    async def notify_client_termination(self, request: Any, caller: Caller) -> Any:
        await self.renewals.release(caller.client_id)
        await self.clients.terminated(caller.client_id)
        return v2.NotifyClientTerminationResponse(status=status())

    async def settings_arrived(self, settings: Any, caller: Caller) -> GrpcClient:
        """A client's settings over Telemetry: it is known from now on, and the brokers of its
        topics hear of it at once (a transaction check may come soon)."""
        group_config: dict[str, Any] = {}
        if settings.HasField("subscription") and settings.subscription.subscriptions:
            subscription = settings.subscription
            group_config = await self.group_config(
                subscription.group.name, subscription.subscriptions[0].topic.name
            )
        merged = self.merge_settings(settings, group_config)
        client = self.clients.settled(caller.client_id, caller.language, caller.version, merged)
        await self.clients.heartbeat(client)
        return client

    def merge_settings(self, settings: Any, group_config: dict[str, Any] | None = None) -> Any:
        """The settings a client gets back (GrpcClientSettingsManager): the server's retry
        policy and limits over what the client sent; a consumer's from its group's config
        (GET_SUBSCRIPTIONGROUP_CONFIG): FIFO when it consumes orderly, its retry policy, its
        retryMaxTimes + 1 attempts."""
        group_config = group_config or {}
        merged = v2.Settings()
        merged.CopyFrom(settings)
        kind = settings.client_type
        if kind == v2.ClientType.PRODUCER:
            policy = merged.backoff_policy
            policy.max_attempts = 3
            policy.exponential_backoff.initial.FromMilliseconds(10)
            policy.exponential_backoff.max.FromMilliseconds(1000)
            policy.exponential_backoff.multiplier = 2.0
            merged.publishing.max_body_size = 4 << 20
            merged.publishing.validate_message_type = True
        elif kind in (v2.ClientType.PUSH_CONSUMER, v2.ClientType.SIMPLE_CONSUMER):
            _retry_settings(merged.backoff_policy, group_config)
            merged.subscription.receive_batch_size = 32
            merged.subscription.long_polling_timeout.FromMilliseconds(MAX_LONG_POLLING_MS)
            merged.subscription.fifo = bool(group_config.get("consumeMessageOrderly"))
        merged.metric.on = False
        return merged

    # -- sending -----------------------------------------------------------------------------
    async def send_message(self, request: Any, caller: Caller) -> Any:
        if not request.messages:
            return v2.SendMessageResponse(status=status("BAD_REQUEST", "no message to send"))
        entries = []
        for message in request.messages:
            try:
                entries.append(await self._send_one(message))
            except Exception as exc:
                entries.append(v2.SendResultEntry(status=refusal(exc)))
        first = entries[0].status
        if len(entries) > 1 and any(e.status.code != first.code for e in entries):
            first = status("MULTIPLE_RESULTS", "the messages had different results")
        return v2.SendMessageResponse(status=first, entries=entries)

    async def _send_one(self, message: Any) -> Any:
        sent = outgoing(message)
        route = await self._route(sent.topic)
        expected = await self.topic_message_type(sent.topic)
        actual = v2.MessageType.Name(message_type_of(sent.properties))
        if actual != expected and expected != "MIXED":
            raise BadMessage(
                "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE",
                f"TopicMessageType validate failed, the expected type is {expected}, "
                f"but actual type is {actual}",
            )
        queues = route.write_queues
        if not queues:
            raise ClientError(ResponseCode.NO_PERMISSION, f"topic {sent.topic} is not writable")
        if sent.message_group is not None:
            queue = queues[consistent_hash(java_string_hash(sent.message_group), len(queues))]
        else:
            queue = queues[next(self._turn) % len(queues)]
        addr = route.master(queue.broker_name)
        if addr is None:
            raise ClientError(
                ResponseCode.SERVICE_NOT_AVAILABLE, f"no master for {queue.broker_name}"
            )
        header = SendMessageRequestHeader(
            producer_group=sent.topic,
            topic=sent.topic,
            default_topic=AUTO_CREATE_TOPIC,
            default_topic_queue_nums=4,
            queue_id=queue.queue_id,
            sys_flag=sent.sys_flag,
            born_timestamp=sent.born_timestamp or int(time.time() * 1000),
            flag=0,
            properties=encode_properties(sent.properties, trailing=False).decode(),
            reconsume_times=sent.reconsume_times,
            unit_mode=False,
            batch=False,
        )
        command = RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, header.to_ext(names=SEND_V2_NAMES), sent.body
        )
        reply = await self.remoting.invoke(addr, command, SEND_TIMEOUT_S)
        if reply.code not in (ResponseCode.SUCCESS,):
            raise ClientError(reply.code, reply.remark or "")
        answer = SendMessageResponseHeader.from_ext(reply.ext_fields)
        ext = reply.ext_fields or {}
        return v2.SendResultEntry(
            status=status(),
            message_id=message.system_properties.message_id,
            transaction_id=TransactionId(
                queue.broker_name, answer.queue_offset, _commit_log_offset(answer.msg_id)
            ).encode(),
            offset=answer.queue_offset,
            recall_handle=ext.get("recallHandle", ""),
        )

    # -- consuming ---------------------------------------------------------------------------
    async def receive_message(self, request: Any, caller: Caller) -> AsyncIterator[Any]:
        """The stream: a status, the messages, then the delivery timestamp."""
        group, topic = request.group.name, request.message_queue.topic.name
        invisible_ms = (
            self.renewals.slice_ms
            if request.auto_renew or not request.HasField("invisible_duration")
            else _duration_ms(request.invisible_duration)
        )
        polling_ms, problem = self._polling_ms(request, caller)
        problem = problem or _receive_problem(request, group, invisible_ms)
        if problem is not None:
            yield v2.ReceiveMessageResponse(status=problem)
            return
        expression = request.filter_expression
        kind = "SQL92" if expression.type == v2.FilterType.SQL else "TAG"
        subscription = Subscription.of(topic, expression.expression or "*", expression_type=kind)
        group_config = await self.group_config(group, topic)
        try:
            messages = await self._pop(
                group,
                subscription,
                request.message_queue.broker.name,
                min(request.batch_size, MAX_POP_BATCH),
                invisible_ms,
                polling_ms,
                orderly=bool(group_config.get("consumeMessageOrderly")),
                attempt_id=request.attempt_id or None,
                max_attempts=self._max_attempts(caller, group_config),
            )
        except Exception as exc:
            yield v2.ReceiveMessageResponse(status=refusal(exc))
            return
        if not messages:
            yield v2.ReceiveMessageResponse(status=status("MESSAGE_NOT_FOUND", "no new message"))
        else:
            yield v2.ReceiveMessageResponse(status=status())
            for popped in messages:
                if request.auto_renew:
                    self.renewals.track(caller.client_id, group, topic, popped.receipt_handle)
                yield v2.ReceiveMessageResponse(
                    message=incoming(popped, popped.receipt_handle, invisible_ms)
                )
        done = v2.ReceiveMessageResponse()
        done.delivery_timestamp.GetCurrentTime()
        yield done

    def _max_attempts(self, caller: Caller, group_config: dict[str, Any]) -> int:
        """The consumer's max delivery attempts: its settings' (merged from its group's
        config), as ReceiveMessageActivity reads them; the group's when it sent none."""
        client = self.clients.clients.get(caller.client_id)
        if client is not None and client.settings.backoff_policy.max_attempts > 0:
            return int(client.settings.backoff_policy.max_attempts)
        return int(group_config.get("retryMaxTimes", 16)) + 1

    def _polling_ms(self, request: Any, caller: Caller) -> tuple[int, Any | None]:
        """How long a receive long-polls (ReceiveMessageActivity): what it asks, else the
        call's remaining time less half the client's request timeout; within 5-20 s and
        never past the deadline; a deadline too near for the shortest poll is refused."""
        remaining = caller.remaining_ms
        if request.HasField("long_polling_timeout"):
            polling = _duration_ms(request.long_polling_timeout)
        elif remaining is not None:
            polling = remaining - self._request_timeout_ms(caller) // 2
        else:
            polling = MAX_LONG_POLLING_MS
        polling = min(max(polling, MIN_LONG_POLLING_MS), MAX_LONG_POLLING_MS)
        if remaining is not None:
            room = remaining - DEADLINE_MARGIN_MS
            if polling > room:
                if room < MIN_LONG_POLLING_MS:
                    # Clients before 5.0.3 know no ILLEGAL_POLLING_TIME: RocketMQ's proxy
                    # answers them BAD_REQUEST (comparing versions as strings, as here).
                    old = not caller.version or caller.version < POLLING_CODE_SINCE_VERSION
                    return 0, status(
                        "BAD_REQUEST" if old else "ILLEGAL_POLLING_TIME",
                        "The deadline time remaining is not enough for polling",
                    )
                polling = room
        return polling, None

    def _request_timeout_ms(self, caller: Caller) -> int:
        client = self.clients.clients.get(caller.client_id)
        if client is not None and client.settings.HasField("request_timeout"):
            return _duration_ms(client.settings.request_timeout)
        return DEFAULT_REQUEST_TIMEOUT_MS

    async def _pop(
        self,
        group: str,
        subscription: Subscription,
        broker_name: str,
        batch: int,
        invisible_ms: int,
        polling_ms: int,
        *,
        orderly: bool = False,
        attempt_id: str | None = None,
        max_attempts: int = 0,
    ) -> list[Any]:
        """POP_MESSAGE, then RocketMQ's proxy's filter: what the tag does not match is acked,
        what was delivered `max_attempts` times or more goes to the DLQ (its broker may retry
        for ever: RocketMQ 5's does); the rest is the consumer's."""
        route = await self._route(subscription.topic)
        names = sorted({q.broker_name for q in route.read_queues})
        if broker_name not in names:
            broker_name = names[next(self._turn) % len(names)] if names else broker_name
        addr = route.master(broker_name)
        if addr is None:
            raise ClientError(ResponseCode.SERVICE_NOT_AVAILABLE, f"no master for {broker_name}")
        header = PopMessageRequestHeader(
            consumer_group=group,
            topic=subscription.topic,
            queue_id=-1,
            max_msg_nums=batch,
            invisible_time=invisible_ms,
            poll_time=polling_ms,
            born_time=int(time.time() * 1000),
            init_mode=int(ConsumeInitMode.MAX),
            exp_type=subscription.expression_type,
            exp=subscription.sub_string,
            order=orderly,
            attempt_id=attempt_id,
            broker_name=broker_name,
        )
        command = RemotingCommand.request(PopRequestCode.POP_MESSAGE, header.to_ext())
        reply = await self.remoting.invoke(addr, command, polling_ms / 1000 + REPLY_MARGIN_S)
        if reply.code == POLLING_FULL:
            raise TooManyPolls(reply.remark or "too many pops held on this queue")
        if reply.code in EMPTY_POP:
            return []
        _check(reply)
        popped = PopMessageResponseHeader.from_ext(reply.ext_fields)
        wanted = []
        topic = subscription.topic
        for message in popped_messages(topic, broker_name, popped, reply.body_bytes):
            handle = message.receipt_handle
            if not subscription.matches_tag(message.tags):
                # The broker matched the tag's hash code, which another tag can share: acked,
                # so that it never comes back.
                await self._ack_quietly(addr, group, topic, handle)
            elif max_attempts and message.reconsume_times >= max_attempts:
                try:
                    await self._dead_letter(
                        addr, group, topic, handle, message.commit_log_offset, message.msg_id,
                        max_attempts,
                    )  # fmt: skip
                    log.info("proxy.dead_lettered", group=group, msg_id=message.msg_id)
                except Exception as exc:  # it comes back after its invisible time
                    log.warning("proxy.dead_letter_failed", msg_id=message.msg_id, error=str(exc))
            else:
                wanted.append(message)
        return wanted

    async def _ack(self, addr: str, group: str, topic: str, info: ExtraInfo, handle: str) -> None:
        """ACK_MESSAGE of the message `handle` names; ClientError when the broker refuses."""
        header = AckMessageRequestHeader(
            consumer_group=group,
            topic=info.real_topic(topic, group),
            queue_id=info.queue_id,
            extra_info=handle,
            offset=_offset(info),
            broker_name=info.broker_name,
        )
        command = RemotingCommand.request(PopRequestCode.ACK_MESSAGE, header.to_ext())
        _check(await self.remoting.invoke(addr, command, CALL_TIMEOUT_S))

    async def _ack_quietly(self, addr: str, group: str, topic: str, handle: str) -> None:
        try:
            await self._ack(addr, group, topic, ExtraInfo.decode(handle), handle)
        except Exception as exc:  # it comes back after its invisible time, filtered again
            log.info("proxy.filtered_ack_failed", handle=handle, error=str(exc))

    async def _handle_target(self, topic: str, handle: str) -> tuple[ExtraInfo, str]:
        info = ExtraInfo.decode(handle)  # ValueError for what is not a handle
        if info.pop_time + info.invisible_time <= time.time() * 1000:
            # Its message is visible again (or on its way): RocketMQ's proxy refuses it.
            raise ExpiredHandle("receipt handle is expired")
        addr = await self.routes.broker_addr(MessageQueue(topic, info.broker_name, info.queue_id))
        if addr is None:
            raise ClientError(
                ResponseCode.SERVICE_NOT_AVAILABLE, f"no master for {info.broker_name}"
            )
        return info, addr

    async def ack_message(self, request: Any, caller: Caller) -> Any:
        group, topic = request.group.name, request.topic.name
        try:
            check_group(group)
            check_topic(topic)
        except BadMessage as exc:
            return v2.AckMessageResponse(status=refusal(exc))
        results = []
        for entry in request.entries:
            handle = self.renewals.newest(entry.receipt_handle)
            try:
                info, addr = await self._handle_target(topic, handle)
            except ValueError:
                results.append(
                    self._ack_result(
                        entry, status("INVALID_RECEIPT_HANDLE", "the receipt handle is invalid")
                    )
                )
                continue
            except Exception as exc:
                results.append(self._ack_result(entry, refusal(exc)))
                continue
            try:
                await self._ack(addr, group, topic, info, handle)
            except Exception as exc:
                results.append(self._ack_result(entry, refusal(exc)))
                continue
            self.renewals.settled(entry.receipt_handle)
            results.append(self._ack_result(entry, status()))
        first = results[0].status if results else status()
        if any(r.status.code != first.code for r in results):
            first = status("MULTIPLE_RESULTS", "the entries had different results")
        return v2.AckMessageResponse(status=first, entries=results)

    @staticmethod
    def _ack_result(entry: Any, result: Any) -> Any:
        return v2.AckMessageResultEntry(
            message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=result
        )

    async def change_invisible(self, group: str, topic: str, handle: str, invisible_ms: int) -> str:
        """CHANGE_MESSAGE_INVISIBLETIME for a handle: the new handle. ValueError for what is
        not a handle; ClientError when the broker refuses."""
        info, addr = await self._handle_target(topic, handle)
        real_topic = info.real_topic(topic, group)
        offset = _offset(info)
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=group,
            topic=real_topic,
            queue_id=info.queue_id,
            extra_info=handle,
            offset=offset,
            invisible_time=invisible_ms,
            broker_name=info.broker_name,
        )
        command = RemotingCommand.request(
            PopRequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext()
        )
        reply = await self.remoting.invoke(addr, command, CALL_TIMEOUT_S)
        _check(reply)
        changed = ChangeInvisibleTimeResponseHeader.from_ext(reply.ext_fields)
        return changed.new_handle(info, real_topic, offset).encode()

    async def change_invisible_duration(self, request: Any, caller: Caller) -> Any:
        group, topic = request.group.name, request.topic.name
        try:
            check_group(group)
            check_topic(topic)
        except BadMessage as exc:
            return v2.ChangeInvisibleDurationResponse(status=refusal(exc))
        invisible_ms = _duration_ms(request.invisible_duration)
        # 0 is a nack that makes the message visible again at once (the Node client's, whose
        # backoff it cannot read); RocketMQ's proxy takes it.
        if not 0 <= invisible_ms <= MAX_INVISIBLE_MS:
            return v2.ChangeInvisibleDurationResponse(
                status=status(
                    "ILLEGAL_INVISIBLE_TIME",
                    f"the invisible time {invisible_ms} ms is not within "
                    f"[0, {MAX_INVISIBLE_MS}] ms",
                )
            )
        given = request.receipt_handle
        try:
            handle = await self.change_invisible(
                group, topic, self.renewals.newest(given), invisible_ms
            )
        except ValueError:
            return v2.ChangeInvisibleDurationResponse(
                status=status("INVALID_RECEIPT_HANDLE", "the receipt handle is invalid")
            )
        except Exception as exc:
            return v2.ChangeInvisibleDurationResponse(status=refusal(exc))
        self.renewals.settled(given)  # a nack: the client decides its time from now on
        return v2.ChangeInvisibleDurationResponse(status=status(), receipt_handle=handle)

    # -- transactions, recall, dead letters ---------------------------------------------------
    async def end_transaction(self, request: Any, caller: Caller) -> Any:
        try:
            tx = TransactionId.decode(request.transaction_id)
        except ValueError as exc:
            return v2.EndTransactionResponse(status=status("INVALID_TRANSACTION_ID", str(exc)))
        resolution = request.resolution
        if resolution not in (v2.TransactionResolution.COMMIT, v2.TransactionResolution.ROLLBACK):
            return v2.EndTransactionResponse(
                status=status(
                    "BAD_REQUEST", "transaction resolution is neither COMMIT nor ROLLBACK"
                )
            )
        topic = request.topic.name
        header = EndTransactionRequestHeader(
            producer_group=topic,
            tran_state_table_offset=tx.queue_offset,
            commit_log_offset=tx.commit_log_offset,
            commit_or_rollback=COMMIT
            if resolution == v2.TransactionResolution.COMMIT
            else ROLLBACK,
            from_transaction_check=request.source == v2.TransactionSource.SOURCE_SERVER_CHECK,
            msg_id=request.message_id,
            transaction_id=request.transaction_id,
        )
        try:
            addr = await self._master(topic, tx.broker_name)
            command = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext())
            await self.remoting.invoke_oneway(addr, command)  # oneway, as RocketMQ sends it
        except Exception as exc:
            return v2.EndTransactionResponse(status=refusal(exc))
        return v2.EndTransactionResponse(status=status())

    async def recall_message(self, request: Any, caller: Caller) -> Any:
        topic = request.topic.name
        try:
            handle = RecallHandle.decode(request.recall_handle)
        except RecallHandleError as exc:
            return v2.RecallMessageResponse(status=status("BAD_REQUEST", str(exc)))
        header = RecallMessageRequestHeader(
            topic=topic,
            recall_handle=request.recall_handle,
            producer_group=topic,
            broker_name=handle.broker_name,
        )
        try:
            addr = await self._master(topic, handle.broker_name)
            command = RemotingCommand.request(RequestCode.RECALL_MESSAGE, header.to_ext())
            reply = await self.remoting.invoke(addr, command, CALL_TIMEOUT_S)
            _check(reply)
        except Exception as exc:
            return v2.RecallMessageResponse(status=refusal(exc))
        answered = (reply.ext_fields or {}).get("msgId", handle.message_id)
        return v2.RecallMessageResponse(status=status(), message_id=answered)

    async def forward_message_to_dead_letter_queue(self, request: Any, caller: Caller) -> Any:
        """The client gives up on a message: to %DLQ%group (CONSUMER_SEND_MSG_BACK with delay
        level -1), then acked, as RocketMQ's proxy does."""
        group, topic = request.group.name, request.topic.name
        handle = self.renewals.newest(request.receipt_handle)
        try:
            info, addr = await self._handle_target(topic, handle)
        except ValueError:
            return v2.ForwardMessageToDeadLetterQueueResponse(
                status=status("INVALID_RECEIPT_HANDLE", "the receipt handle is invalid")
            )
        except Exception as exc:
            return v2.ForwardMessageToDeadLetterQueueResponse(status=refusal(exc))
        try:
            commit_log_offset = await self._commit_log_offset_of(addr, topic, group, info)
            await self._dead_letter(
                addr, group, topic, handle, commit_log_offset, request.message_id,
                request.max_delivery_attempts,
            )  # fmt: skip
        except Exception as exc:
            return v2.ForwardMessageToDeadLetterQueueResponse(status=refusal(exc))
        self.renewals.settled(request.receipt_handle)
        return v2.ForwardMessageToDeadLetterQueueResponse(status=status())

    async def _dead_letter(
        self,
        addr: str,
        group: str,
        topic: str,
        handle: str,
        commit_log_offset: int,
        message_id: str,
        max_attempts: int,
    ) -> None:
        """The message at `commit_log_offset` to %DLQ%group (CONSUMER_SEND_MSG_BACK with delay
        level -1), then its pop acked; ClientError when the broker refuses either."""
        back = ConsumerSendMsgBackRequestHeader(
            offset=commit_log_offset,
            group=group,
            delay_level=-1,
            origin_msg_id=message_id,
            origin_topic=topic,
            max_reconsume_times=max_attempts - 1,
        )
        reply = await self.remoting.invoke(
            addr,
            RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, back.to_ext()),
            CALL_TIMEOUT_S,
        )
        _check(reply)
        await self._ack(addr, group, topic, ExtraInfo.decode(handle), handle)

    async def _commit_log_offset_of(
        self, addr: str, topic: str, group: str, info: ExtraInfo
    ) -> int:
        """The CommitLog offset of the message a handle names (CONSUMER_SEND_MSG_BACK reads the
        message there): from its queue's entry, read with a one-message pull."""
        header = PullMessageRequestHeader(
            consumer_group=group,
            topic=info.real_topic(topic, group),
            queue_id=info.queue_id,
            queue_offset=_offset(info),
            max_msg_nums=1,
            # The subscription is this request's ("*"): the group need not subscribe to a
            # retry topic the message may come from.
            sys_flag=PULL_FLAG_SUBSCRIPTION,
            commit_offset=0,
            suspend_timeout_millis=0,
            subscription="*",
            sub_version=0,
        )
        reply = await self.remoting.invoke(
            addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext()), CALL_TIMEOUT_S
        )
        _check(reply)
        record = decode_record(reply.body_bytes, 0)
        if not isinstance(record, MessageRecord):
            raise ClientError(ResponseCode.NO_MESSAGE, "the message of the handle is gone")
        return int(record.phy_offset)


def _commit_log_offset(offset_msg_id: str) -> int:
    """The CommitLog offset an offset message id ends with (its last 16 hex digits)."""
    return int(offset_msg_id[-16:], 16)


# RocketMQ's default customized policy: 1s 5s 10s 30s 1m 2m ... 10m 20m 30m 1h 2h.
_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600)
DEFAULT_BACKOFF_MS: tuple[int, ...] = tuple(s * 1000 for s in (*_BACKOFF_S, 7200))


def _retry_settings(policy: Any, group_config: dict[str, Any]) -> None:
    """A consumer's backoff policy from its group's config (GroupRetryPolicy: CUSTOMIZED, the
    default, or EXPONENTIAL) and retryMaxTimes + 1 attempts."""
    policy.max_attempts = int(group_config.get("retryMaxTimes", 16)) + 1
    retry = group_config.get("groupRetryPolicy") or {}
    if retry.get("type") == "EXPONENTIAL":
        exponential = retry.get("exponentialRetryPolicy") or {}
        backoff = policy.exponential_backoff
        backoff.initial.FromMilliseconds(int(exponential.get("initial", 5_000)))
        backoff.max.FromMilliseconds(int(exponential.get("max", 7_200_000)))
        backoff.multiplier = float(exponential.get("multiplier", 2))
        return
    steps = (retry.get("customizedRetryPolicy") or {}).get("next") or DEFAULT_BACKOFF_MS
    policy.customized_backoff.ClearField("next")
    for step_ms in steps:
        policy.customized_backoff.next.add().FromMilliseconds(int(step_ms))


def _receive_problem(request: Any, group: str, invisible_ms: int) -> Any | None:
    """Why a ReceiveMessage is refused before any pop, as a status; None when it is not."""
    try:
        check_group(group)
    except BadMessage as exc:
        return refusal(exc)
    if not request.auto_renew and not request.HasField("invisible_duration"):
        return status("ILLEGAL_INVISIBLE_TIME", "the invisible time is not set")
    if not request.auto_renew and not MIN_INVISIBLE_MS <= invisible_ms <= MAX_INVISIBLE_MS:
        return status(
            "ILLEGAL_INVISIBLE_TIME",
            f"the invisible time {invisible_ms} ms is not within "
            f"[{MIN_INVISIBLE_MS}, {MAX_INVISIBLE_MS}] ms",
        )
    if request.batch_size <= 0:
        return status("BAD_REQUEST", f"batch size {request.batch_size} is not positive")
    return None


def _offset(info: ExtraInfo) -> int:
    return info.ck_queue_offset if info.queue_offset is None else info.queue_offset


def consistent_hash(key: int, buckets: int) -> int:
    """Guava's Hashing.consistentHash(long, int), which RocketMQ's proxy uses to put a message
    group on a queue, so a group lands on the queue it would land on there."""
    state, candidate = key & 0xFFFFFFFFFFFFFFFF, 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        top = state >> 33  # (int) (state >>> 33): 31 bits, never negative
        following = int((candidate + 1) / ((top + 1) / float(1 << 31)))
        if 0 <= following < buckets:
            candidate = following
        else:
            return candidate

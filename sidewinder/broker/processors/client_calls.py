"""Admin codes the broker answers by calling the group's consumers (RocketMQ's Broker2Client and
AdminBrokerProcessor.callConsumer): INVOKE_BROKER_TO_RESET_OFFSET (222, which sends
RESET_CONSUMER_CLIENT_OFFSET 220 oneway to every online consumer),
INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223, asking each one with GET_CONSUMER_STATUS_FROM_CLIENT
221), GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309), the last two forwarded
to one client by its clientId and its answer handed back as it is.

    processor = ClientCallsProcessor(config, store, topics, offsets, clients)
    # routes.py registers it for 222, 223, 307 and 309
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from sidewinder.broker.clients import ClientChannel, Clients
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.offsets import ConsumerOffsets
from sidewinder.broker.topics import TopicTable
from sidewinder.protocol.client_calls import (
    V3_0_7_SNAPSHOT,
    V3_1_8_SNAPSHOT,
    ConsumeMessageDirectlyRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    QueueKey,
    ResetOffsetRequestHeader,
    consumer_status_body,
    parse_offset_table,
    reset_offset_body,
)
from sidewinder.protocol.codes import LanguageCode, RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import ConsumerNotOnline, SidewinderError
from sidewinder.protocol.message import decode_offset_msg_id
from sidewinder.remoting.connection import Connection, RemotingError, RemotingTimeoutError
from sidewinder.remoting.dispatch import RequestContext
from sidewinder.store.message_store import MessageStore

log = structlog.get_logger(__name__)

# Broker2Client's waits: callClient 10 s, the consumer status fan-out 5 s per client.
CALL_CLIENT_TIMEOUT_S = 10.0
CONSUMER_STATUS_TIMEOUT_S = 5.0


class ClientCallsProcessor:
    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicTable,
        offsets: ConsumerOffsets,
        clients: Clients,
        *,
        call_timeout_s: float = CALL_CLIENT_TIMEOUT_S,
        status_timeout_s: float = CONSUMER_STATUS_TIMEOUT_S,
    ) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.clients = clients
        self.call_timeout_s = call_timeout_s
        self.status_timeout_s = status_timeout_s

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        code = request.code
        if code == RequestCode.INVOKE_BROKER_TO_RESET_OFFSET:
            return self._reset_offset(request)
        if code == RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS:
            return await self._consumer_status(request)
        if code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            header = GetConsumerRunningInfoRequestHeader.from_ext(request.ext_fields)
            return await self._call_consumer(request, header.consumer_group, header.client_id)
        return await self._consume_directly(request)

    # -- 222: reset offsets ------------------------------------------------------------------------
    def reset_table(
        self, topic: str, group: str, timestamp_ms: int, force: bool
    ) -> dict[QueueKey, int]:
        """Each write queue's new offset (Broker2Client.resetOffset): the offset at the time (the
        queue's end for -1), kept only when forced or behind the committed one; a refusal when
        the topic or the group's offsets are unknown here."""
        config = self.topics.get(topic)
        if config is None:
            raise SidewinderError(
                f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}"
            )
        table: dict[QueueKey, int] = {}
        for queue_id in range(config.write_queue_nums):
            committed = self.offsets.query(group, topic, queue_id)
            if committed == -1:
                raise SidewinderError(f"THe consumer group <{group}> not exist")
            if timestamp_ms == -1:
                at_time = self.store.max_offset_in_queue(topic, queue_id)
            else:
                at_time = self.store.offset_by_time(topic, queue_id, timestamp_ms)
            at_time = max(at_time, 0)
            chosen = at_time if force or at_time < committed else committed
            table[QueueKey(topic, self.config.broker_name, queue_id)] = chosen
        return table

    def _reset_offset(self, request: RemotingCommand) -> RemotingCommand:
        header = ResetOffsetRequestHeader.from_ext(request.ext_fields)
        log.info(
            "client_calls.reset_offset",
            topic=header.topic,
            group=header.group,
            timestamp=header.timestamp,
            force=header.is_force,
        )
        table = self.reset_table(header.topic, header.group, header.timestamp, header.is_force)
        channels = self._consumers(header.group)
        if not channels:
            raise ConsumerNotOnline(
                f"Consumer not online, so can not reset offset, Group: {header.group} "
                f"Topic: {header.topic} Timestamp: {header.timestamp}"
            )
        _refuse_too_old(channels)
        # The body form follows the language of the admin's request, as RocketMQ decides it.
        for_cpp = request.language == LanguageCode.CPP
        # The clients get the admin's topic, group and time, not its force flag (Java leaves
        # that field at its default).
        notice = ResetOffsetRequestHeader(header.topic, header.group, header.timestamp, False)
        payload = reset_offset_body(table, for_cpp=for_cpp)
        for channel in channels:
            if isinstance(channel.connection, Connection):
                channel.connection.invoke_oneway(
                    _to_client(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, notice.to_ext(), payload)
                )
        return request.reply(ResponseCode.SUCCESS, body=reset_offset_body(table))

    # -- 223: consumer status ----------------------------------------------------------------------
    async def _consumer_status(self, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumerStatusRequestHeader.from_ext(request.ext_fields)
        channels = self._consumers(header.group)
        if not channels:
            raise SidewinderError(f"No Any Consumer online in the consumer group: [{header.group}]")
        _refuse_too_old(channels)
        wanted = header.client_addr or ""
        asked = [c for c in channels if not wanted.strip() or c.client_id == wanted][
            : 1 if wanted.strip() else None
        ]
        ask = GetConsumerStatusRequestHeader(header.topic, header.group).to_ext()
        answers = await asyncio.gather(*(self._status_of(c, ask) for c in asked))
        table = {c.client_id: t for c, t in zip(asked, answers, strict=True) if t is not None}
        return request.reply(ResponseCode.SUCCESS, body=consumer_status_body(table))

    async def _status_of(
        self, channel: ClientChannel, ext: dict[str, str]
    ) -> dict[QueueKey, int] | None:
        """One client's offsets; None when it fails or does not answer (RocketMQ logs it and
        leaves the client out)."""
        if not isinstance(channel.connection, Connection):
            return None
        ask = _to_client(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, dict(ext))
        try:
            answer = await channel.connection.invoke(ask, self.status_timeout_s)
        except (RemotingError, OSError) as exc:
            log.warning("client_calls.status_failed", client=channel.client_id, error=str(exc))
            return None
        if answer.code != ResponseCode.SUCCESS or not answer.body:
            return None
        try:
            return parse_offset_table(answer.body_bytes, "messageQueueTable")
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            log.warning("client_calls.status_unreadable", client=channel.client_id, error=str(exc))
            return None

    # -- 309: consume one message directly ---------------------------------------------------------
    async def _consume_directly(self, request: RemotingCommand) -> RemotingCommand:
        header = ConsumeMessageDirectlyRequestHeader.from_ext(request.ext_fields)
        ext = dict(request.ext_fields or {})
        ext["brokerName"] = self.config.broker_name
        record_bytes = self._message_bytes(header.msg_id)
        forwarded = _to_client(RequestCode.CONSUME_MESSAGE_DIRECTLY, ext, record_bytes)
        return await self._call_consumer(
            request, header.consumer_group, header.client_id, forwarded
        )

    def _message_bytes(self, msg_id: str | None) -> bytes:
        """The stored record an offsetMsgId names; a refusal naming what is wrong."""
        try:
            _, _, phy_offset = decode_offset_msg_id(msg_id or "")
        except ValueError as exc:
            raise SidewinderError(f"can not decode the message id: {exc}") from None
        record = self.store.lookup_message_by_offset(phy_offset)
        data = self.store.record_bytes(phy_offset, record.total_size) if record else None
        if data is None:
            raise SidewinderError(f"can not find message by the offset, {phy_offset}")
        return bytes(data)

    # -- forwarding ------------------------------------------------------------------------------
    async def _call_consumer(
        self,
        request: RemotingCommand,
        group: str,
        client_id: str | None,
        forwarded: RemotingCommand | None = None,
    ) -> RemotingCommand:
        """Hand the request to one consumer of the group and its answer back (callConsumer)."""
        channel = self._find_channel(group, client_id)
        if channel is None or not isinstance(channel.connection, Connection):
            raise SidewinderError(f"The Consumer <{group}> <{client_id}> not online")
        if channel.version < V3_1_8_SNAPSHOT:
            raise SidewinderError(
                f"The Consumer <{client_id}> Version <{_version_desc(channel.version)}> too low "
                "to finish, please upgrade it to V3_1_8_SNAPSHOT"
            )
        if forwarded is None:
            forwarded = _to_client(
                request.code, dict(request.ext_fields or {}), request.body_bytes or None
            )
        try:
            answer = await channel.connection.invoke(forwarded, self.call_timeout_s)
        except RemotingTimeoutError as exc:
            raise SidewinderError(
                f"consumer <{group}> <{client_id}> Timeout: {exc}", ResponseCode.CONSUME_MSG_TIMEOUT
            ) from None
        except (RemotingError, OSError) as exc:
            raise SidewinderError(
                f"invoke consumer <{group}> <{client_id}> Exception: {exc}"
            ) from None
        return request.reply(
            answer.code,
            answer.remark,
            ext_fields=answer.ext_fields,
            body=answer.body_bytes or None,
        )

    def _consumers(self, group: str) -> list[ClientChannel]:
        found = self.clients.consumers.get(group)
        return list(found.channels.values()) if found is not None else []

    def _find_channel(self, group: str, client_id: str | None) -> ClientChannel | None:
        """ConsumerManager.findChannel: the group's channel with this client id."""
        return next((c for c in self._consumers(group) if c.client_id == client_id), None)


def _to_client(code: int, ext: dict[str, str], payload: bytes | None = None) -> RemotingCommand:
    """A request from the broker to a client, in the language RocketMQ's broker states."""
    return RemotingCommand.request(code, ext, payload, language=LanguageCode.JAVA)


def _refuse_too_old(channels: list[ClientChannel]) -> None:
    """Refuse when a consumer predates V3_0_7 (it cannot take offsets from the broker)."""
    too_old = next((c for c in channels if c.version < V3_0_7_SNAPSHOT), None)
    if too_old is not None:
        raise SidewinderError(
            f"the client does not support this feature. version={_version_desc(too_old.version)}"
        )


def _version_desc(version: Any) -> str:
    """MQVersion.getVersionDesc, for the ordinals this module refuses (all below V3_1_8)."""
    return f"V3_x_ordinal_{version}"

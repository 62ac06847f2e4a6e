"""What a broker asks of a gRPC client, relayed over the client's Telemetry stream as RocketMQ's
proxy relays it in local mode:

- CHECK_TRANSACTION_STATE (a half message left undecided): RecoverOrphanedTransactionCommand to
  a live producer of its topic, who answers with EndTransaction (SOURCE_SERVER_CHECK); nothing
  goes back to the broker.
- GET_CONSUMER_RUNNING_INFO (`mqadmin consumerStatus`): what the front knows of the consumer
  (its settings as ConsumerRunningInfo properties and subscriptions), answered at once; with
  `-s`, also its threads' stacks, asked with PrintThreadStackTraceCommand. RocketMQ's proxy
  answers only the `-s` form, with the stacks alone, and leaves the other to time out.
- CONSUME_MESSAGE_DIRECTLY (`mqadmin queryMsgById -g -d`): VerifyMessageCommand, whose
  VerifyMessageResult status becomes the ConsumeMessageDirectlyResult (OK: CR_SUCCESS,
  FAILED_TO_CONSUME_MESSAGE: CR_LATER, MESSAGE_CORRUPTED: CR_RETURN_NULL, else no result).

A command that wants an answer carries a nonce; the answer arrives on the client's stream
(`answered`). A client that does not answer within CLIENT_ANSWER_TIMEOUT_S is reported as
such, well inside the broker's and mqadmin's own timeouts.

    calls = ClientCalls(clients, broker_name_at)
    table.register(calls, *CLIENT_CALL_CODES)
    calls.answered(command)          # a ThreadStackTrace or VerifyMessageResult from a client
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from sidewinder.client.pulling import ReceivedMessage
from sidewinder.client.route_cache import MessageQueue
from sidewinder.common.deadline import expire_after
from sidewinder.protocol import body
from sidewinder.protocol.client_calls import (
    ConsumeMessageDirectlyRequestHeader,
    GetConsumerRunningInfoRequestHeader,
)
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.headers import CheckTransactionStateRequestHeader
from sidewinder.protocol.record import MessageRecord, decode_record
from sidewinder.proxy import grpc_protocol as v2
from sidewinder.proxy.clients import ClientRegistry, GrpcClient
from sidewinder.proxy.convert import TransactionId, incoming
from sidewinder.remoting.dispatch import RequestContext

log = structlog.get_logger(__name__)

CLIENT_CALL_CODES = (
    RequestCode.CHECK_TRANSACTION_STATE,
    RequestCode.GET_CONSUMER_RUNNING_INFO,
    RequestCode.CONSUME_MESSAGE_DIRECTLY,
)
# mqadmin gives the broker 5 s (the broker gives the client 10 s): an answer after that
# reaches nobody.
CLIENT_ANSWER_TIMEOUT_S = 4.5
_VERIFY_RESULTS = {
    v2.Code.OK: "CR_SUCCESS",
    v2.Code.FAILED_TO_CONSUME_MESSAGE: "CR_LATER",
    v2.Code.MESSAGE_CORRUPTED: "CR_RETURN_NULL",
}


class ClientCalls:
    """The broker-to-client requests of the front's remoting connections, and the answers
    that come back over Telemetry."""

    def __init__(
        self,
        clients: ClientRegistry,
        broker_name_at: Callable[[str, str], Awaitable[str]],
        answer_timeout_s: float = CLIENT_ANSWER_TIMEOUT_S,
    ) -> None:
        self.clients = clients
        self.broker_name_at = broker_name_at
        self.answer_timeout_s = answer_timeout_s
        self._pending: dict[str, asyncio.Future[Any]] = {}
        self._nonces = itertools.count(1)
        self._prefix = f"{os.getpid():x}-{time.time_ns():x}-"

    async def process(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:
            await self._check_transaction(ctx, request)
            return None
        if request.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            return await self._running_info(request)
        return await self._consume_directly(ctx, request)

    def answered(self, command: Any) -> None:
        """A client's ThreadStackTrace or VerifyMessageResult: the call waiting on its nonce
        gets the whole command (status and result)."""
        kind = command.WhichOneof("command")
        if kind not in ("thread_stack_trace", "verify_message_result"):
            return
        nonce = getattr(command, kind).nonce
        future = self._pending.pop(nonce, None)
        if future is None:
            log.info("proxy.late_client_answer", kind=kind, nonce=nonce)
        elif not future.done():
            future.set_result(command)

    async def _ask(self, client: GrpcClient, command: Any, field: str) -> Any | None:
        """Push `command` (its `field` given a fresh nonce) to the client; its answer, or None
        when none came in time. A client between two Telemetry streams (it renews a broken
        one after a pause) gets the command once it is back, within the same time."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.answer_timeout_s
        # Not asyncio.timeout: a processor may run outside a task (remoting/dispatch.py).
        attached = client.stream_attached()
        expiry = expire_after(attached, self.answer_timeout_s, result=None)
        try:
            await attached
        finally:
            expiry.cancel()
        outbox = client.telemetry
        if outbox is None:
            log.info("proxy.client_call_unanswered", client=client.client_id, stream=False)
            return None
        nonce = f"{self._prefix}{next(self._nonces)}"
        getattr(command, field).nonce = nonce
        future: asyncio.Future[Any] = loop.create_future()
        self._pending[nonce] = future
        outbox.put_nowait(command)
        expiry = expire_after(future, deadline - loop.time(), result=None)
        try:
            answer = await future
        finally:
            expiry.cancel()
            self._pending.pop(nonce, None)
        if answer is None:
            log.info("proxy.client_call_unanswered", client=client.client_id, stream=True)
        return answer

    def _consumer(self, request: RemotingCommand, group: str, client_id: str | None) -> Any:
        """The consumer of `group` called `client_id`, or the refusal to answer with."""
        client = self.clients.clients.get(client_id or "")
        if client is None or client.is_producer or client.group != group:
            return request.reply(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer Group <{group}> not exist in this consumer "
                f"(no gRPC consumer {client_id} of it at this front)",
            )
        return client

    # -- 39: a transaction check ---------------------------------------------------------------
    async def _check_transaction(self, ctx: RequestContext, request: RemotingCommand) -> None:
        header = CheckTransactionStateRequestHeader.from_ext(request.ext_fields)
        record = decode_record(bytes(request.body or b""), 0)
        if not isinstance(record, MessageRecord):
            log.warning("proxy.check_without_message", broker=ctx.remote_address)
            return
        topic = record.topic
        client = self.clients.producer_of(topic)
        if client is None or client.telemetry is None:
            log.info("proxy.check_unclaimed", topic=topic, msg_id=header.msg_id)
            return
        broker_name = await self.broker_name_at(topic, ctx.remote_address)
        message = ReceivedMessage.of(MessageQueue(topic, broker_name, record.queue_id), record)
        transaction = TransactionId(
            broker_name, header.tran_state_table_offset, header.commit_log_offset
        )
        command = v2.TelemetryCommand(
            recover_orphaned_transaction_command=v2.RecoverOrphanedTransactionCommand(
                message=incoming(message, "", 0), transaction_id=transaction.encode()
            )
        )
        client.telemetry.put_nowait(command)

    # -- 307: consumerStatus -------------------------------------------------------------------
    async def _running_info(self, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumerRunningInfoRequestHeader.from_ext(request.ext_fields)
        client = self._consumer(request, header.consumer_group, header.client_id)
        if isinstance(client, RemotingCommand):
            return client
        info = client.running_info()
        if header.jstack_enable:
            command = v2.TelemetryCommand(
                print_thread_stack_trace_command=v2.PrintThreadStackTraceCommand()
            )
            answer = await self._ask(client, command, "print_thread_stack_trace_command")
            info["jstack"] = _stacks_of(answer, self.answer_timeout_s)
        return request.reply(ResponseCode.SUCCESS, body=body.dumps(info).encode())

    # -- 309: queryMsgById -g -d ---------------------------------------------------------------
    async def _consume_directly(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = ConsumeMessageDirectlyRequestHeader.from_ext(request.ext_fields)
        client = self._consumer(request, header.consumer_group, header.client_id)
        if isinstance(client, RemotingCommand):
            return client
        record = decode_record(request.body_bytes, 0) if request.body else None
        if not isinstance(record, MessageRecord):
            return request.reply(ResponseCode.SYSTEM_ERROR, "the body is not a stored message")
        broker_name = header.broker_name or await self.broker_name_at(
            record.topic, ctx.remote_address
        )
        message = ReceivedMessage.of(
            MessageQueue(record.topic, broker_name, record.queue_id), record
        )
        command = v2.TelemetryCommand(
            verify_message_command=v2.VerifyMessageCommand(message=incoming(message, "", 0))
        )
        started = time.monotonic()
        answer = await self._ask(client, command, "verify_message_command")
        if answer is None:
            return request.reply(
                ResponseCode.SYSTEM_ERROR,
                f"the gRPC consumer {client.client_id} did not answer within "
                f"{self.answer_timeout_s:g} s ({client.language} client {client.version})",
            )
        result: dict[str, Any] = {
            "autoCommit": True,
            "order": False,
            "remark": "from gRPC client",
            "spentTimeMills": int((time.monotonic() - started) * 1000),
        }
        verdict = _VERIFY_RESULTS.get(answer.status.code)
        if verdict is not None:
            result["consumeResult"] = verdict
        else:
            result["remark"] += f": {v2.Code.Name(answer.status.code)} {answer.status.message}"
        return request.reply(ResponseCode.SUCCESS, body=body.dumps(result).encode())


def _stacks_of(answer: Any | None, waited_s: float) -> str:
    if answer is None:
        return f"(the client sent no thread stacks within {waited_s:g} s)"
    if answer.status.code != v2.Code.OK:
        return f"(the client answered {v2.Code.Name(answer.status.code)}: {answer.status.message})"
    return str(answer.thread_stack_trace.thread_stack_trace)

"""ACL 1.0 for gRPC clients: the v2 signature checked, and the front's remoting calls made
in the client's name.

A 5.x client signs each call: `authorization: MQv2-HMAC-SHA1 Credential=<AccessKey>,
SignedHeaders=x-mq-date-time, Signature=<hex HMAC-SHA1(SecretKey, x-mq-date-time)>`. The front
finds the access key's secret (the accounts of plain_acl.yml: the broker's in local mode,
mqproxy's own in cluster mode), checks the signature and the call's resources, and signs the
remoting requests it makes for that call with the same account, so a broker with ACL on decides
as well, as for a 4.x client.

    secret_of, permit = acl_checks(AclValidator(PlainAclFiles(home)))
    MessagingActivity(namesrv, endpoints, secret_of, permit)
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sidewinder.acl.errors import AclDenied
from sidewinder.acl.validator import AclValidator
from sidewinder.protocol.acl import ANY, PUB, RETRY_PREFIX, SUB, sign_request
from sidewinder.protocol.command import RemotingCommand

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
_FIELDS = re.compile(r"(\w+)=([^,\s]*)")
# The account the current call runs as (the task of one RPC): its remoting requests are signed.
CALL_ACCOUNT: contextvars.ContextVar[Account | None] = contextvars.ContextVar(
    "sidewinder_grpc_account", default=None
)


@dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str


class Unauthorized(Exception):
    """The call's credentials do not hold; the message says why (v2 UNAUTHORIZED)."""


class Forbidden(Exception):
    """The account may not do what the call asks; the message says why (v2 FORBIDDEN)."""


def acl_checks(
    acl: AclValidator,
) -> tuple[Callable[[str], str | None], Callable[[str, Needed, str], None]]:
    """The front's two questions to plain ACL: an access key's secret (None: no such account),
    and whether an account at an address may have the resources a call needs (Forbidden)."""

    def secret_of(access_key: str) -> str | None:
        account = acl.snapshot.accounts.get(access_key)
        return None if account is None else account.secret_key

    def permit(access_key: str, needed: Needed, address: str) -> None:
        try:
            acl.permit(access_key, needed, address)
        except AclDenied as exc:
            raise Forbidden(str(exc)) from None

    return secret_of, permit


def signature(secret_key: str, date_time: str) -> str:
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def authenticate(metadata: dict[str, str], secret_of: Callable[[str], str | None]) -> Account:
    """The account a call's metadata proves, or Unauthorized."""
    header = metadata.get(AUTHORIZATION, "")
    if not header:
        raise Unauthorized("no authorization: this server runs ACL, sign with an access key")
    scheme, _, rest = header.partition(" ")
    fields = dict(_FIELDS.findall(rest))
    access_key = fields.get("Credential", "")
    if scheme != "MQv2-HMAC-SHA1" or not access_key or "Signature" not in fields:
        raise Unauthorized(f"authorization {scheme!r} is not MQv2-HMAC-SHA1 with a credential")
    secret = secret_of(access_key)
    if secret is None:
        raise Unauthorized(f"No acl config for {access_key}")
    expected = signature(secret, metadata.get(DATE_TIME, ""))
    if not hmac.compare_digest(expected, fields["Signature"].lower()):
        raise Unauthorized(f"Check signature failed for accessKey={access_key}")
    return Account(access_key, secret)


def sign_as_caller(address: str, request: RemotingCommand) -> None:
    """The remoting client's before_request: sign with the current call's account, if any."""
    account = CALL_ACCOUNT.get()
    if account is not None:
        sign_request(request, account.access_key, account.secret_key)


# What a v2 request touches and the permission each needs (RocketMQ's PlainAccessResource.parse
# of a gRPC message): topics by name, groups by their retry topic.
Needed = list[tuple[str, int]]


def _group(name: str) -> str:
    return RETRY_PREFIX + name


def needed_for(rpc: str, request: Any) -> Needed:
    """The resources a call of `rpc` with `request` needs, in RocketMQ's order."""
    if rpc == "SendMessage":
        return [(m.topic.name, PUB) for m in request.messages]
    if rpc in ("EndTransaction", "RecallMessage"):
        return [(request.topic.name, PUB)]
    if rpc == "ReceiveMessage":
        return [(request.message_queue.topic.name, SUB), (_group(request.group.name), SUB)]
    if rpc in ("AckMessage", "ChangeInvisibleDuration", "ForwardMessageToDeadLetterQueue"):
        return [(request.topic.name, SUB), (_group(request.group.name), SUB)]
    if rpc == "QueryAssignment":
        return [(request.topic.name, SUB), (_group(request.group.name), SUB)]
    if rpc == "QueryRoute":
        return [(request.topic.name, ANY)]
    if rpc in ("Heartbeat", "NotifyClientTermination"):
        return [(_group(request.group.name), SUB)] if request.HasField("group") else []
    return []


def needed_for_settings(settings: Any) -> Needed:
    """A client's settings over Telemetry: PUB on what it publishes, SUB on its group and
    what it subscribes to."""
    if settings.HasField("publishing"):
        return [(t.name, PUB) for t in settings.publishing.topics]
    if settings.HasField("subscription"):
        subscription = settings.subscription
        needed: Needed = [(_group(subscription.group.name), SUB)]
        return needed + [(e.topic.name, SUB) for e in subscription.subscriptions]
    return []

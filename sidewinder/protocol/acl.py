"""Request signatures of RocketMQ's ACL 1.0, shared by the broker (checking) and the client
(signing), as AclClientRPCHook and PlainAccessValidator compute them.

    sign_request(request, "RocketMQ", "12345678")   # adds AccessKey and Signature ext fields

The signature is Base64(HmacSHA1(secretKey, the values of the ext fields sorted by key, the
Signature field left out, then the body)), the values joined as UTF-8 text.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Collection, Mapping
from contextvars import ContextVar
from dataclasses import dataclass

from sidewinder.protocol.command import RemotingCommand

# RocketMQ's ACL 1.0 permissions (Permission.DENY, ANY, PUB, SUB), bits of an account's grant.
DENY, ANY, PUB, SUB = 1, 2, 4, 8
RETRY_PREFIX = "%RETRY%"  # a group's resource is its retry topic

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"


def compute_signature(
    secret_key: str,
    ext_fields: Mapping[str, str],
    body: bytes | bytearray | memoryview | None,
    skip: Collection[str] = (SIGNATURE,),
) -> str:
    """The signature of these fields and body under `secret_key` (the body is not copied)."""
    mac = hmac.new(secret_key.encode("utf-8"), digestmod=hashlib.sha1)
    mac.update("".join(ext_fields[key] for key in sorted(ext_fields) if key not in skip).encode())
    if body:
        mac.update(body)
    return base64.b64encode(mac.digest()).decode("ascii")


@dataclass(frozen=True)
class Credentials:
    """An account's keys, as the stock clients' SessionCredentials hold them."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def sign(self, request: RemotingCommand) -> None:
        sign_request(request, self.access_key, self.secret_key, self.security_token)

    def before_request(self, address: str, request: RemotingCommand) -> None:
        """The remoting client's hook: every request signed on its way out."""
        self.sign(request)


def credentials(access_key: str | None, secret_key: str | None) -> Credentials | None:
    """The keys a client was given, or None for none; one without the other is a mistake."""
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise ValueError("access_key and secret_key go together: give both or neither")
    return Credentials(access_key, secret_key)


# The keys of the clients made without keys of their own in this context: a tool (our mqadmin)
# sets them once for every client its sub-commands make.
DEFAULT_CREDENTIALS: ContextVar[Credentials | None] = ContextVar(
    "DEFAULT_CREDENTIALS", default=None
)


def request_hook(
    access_key: str | None, secret_key: str | None
) -> Callable[[str, RemotingCommand], None] | None:
    """The remoting client's `before_request` for these keys, else for DEFAULT_CREDENTIALS
    (None without any)."""
    keys = credentials(access_key, secret_key) or DEFAULT_CREDENTIALS.get()
    return None if keys is None else keys.before_request


def sign_request(
    request: RemotingCommand,
    access_key: str,
    secret_key: str,
    security_token: str | None = None,
) -> None:
    """Add AccessKey (and SecurityToken) to the request's ext fields, then its Signature."""
    fields = dict(request.ext_fields or {})
    fields[ACCESS_KEY] = access_key
    if security_token is not None:
        fields[SECURITY_TOKEN] = security_token
    fields[SIGNATURE] = compute_signature(secret_key, fields, request.body)
    request.ext_fields = fields
    request.encoded_header = None  # the header must carry the new fields

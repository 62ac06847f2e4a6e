"""The broker's access check, RocketMQ 4.9's PlainAccessValidator: every request, before any
processor sees it.

    acl = AclValidator(PlainAclFiles(home))    # reads the files; AclConfigError if RocketMQ
    table.guard(acl.check)                     # would refuse them
    task = loop.create_task(acl.watch())       # reloads a file within 500 ms of its change

In RocketMQ's order: a client on a global white-listed address passes; else the request must
name a known AccessKey; a client on that account's white-listed address passes; else the
Signature must be right, then an admin-only code needs an admin account and each resource the
request touches (its topic, its group's retry topic) the permission it needs: the account's for
that resource, else its default topic or group permission. A refusal is AclDenied (SYSTEM_ERROR
with RocketMQ's remark).
"""

from __future__ import annotations

import asyncio

import structlog

from sidewinder.acl import errors as where
from sidewinder.acl.errors import AclConfigError, AclDenied
from sidewinder.acl.permission import (
    ADMIN_CODES,
    PUB,
    check_permission,
    describe,
    is_group,
)
from sidewinder.acl.plain import Account, AclSnapshot, PlainAclFiles
from sidewinder.acl.resources import needed_perms
from sidewinder.protocol.acl import ACCESS_KEY, SIGNATURE, compute_signature
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.dispatch import RequestContext

log = structlog.get_logger(__name__)

WATCH_INTERVAL_S = 0.5
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
# Not signed by the clients that add it after signing (MixAll.UNIQUE_MSG_QUERY_FLAG).
_UNSIGNED = (SIGNATURE, "_UNIQUE_KEY_QUERY")


def host_of(remote_address: str) -> str:
    """The address part of `host:port` (RocketMQ cuts at the last colon)."""
    host, sep, _ = remote_address.rpartition(":")
    return host.strip("[]") if sep else remote_address


class AclValidator:
    def __init__(self, files: PlainAclFiles) -> None:
        self.files = files
        self.snapshot: AclSnapshot = files.load()
        self._stamps = files.stamps()
        log.info(
            "acl.loaded",
            files=[str(p) for p in self.snapshot.files],
            accounts=len(self.snapshot.accounts),
        )

    def check(self, ctx: RequestContext, request: RemotingCommand) -> None:
        self.validate(host_of(ctx.remote_address), request)

    def validate(self, address: str, request: RemotingCommand) -> None:
        """Return if the request may pass; raise AclDenied if not."""
        needed = needed_perms(request)
        snapshot = self.snapshot
        if any(white(address) for white in snapshot.global_white):
            return
        ext = request.ext_fields
        access_key = ext.get(ACCESS_KEY) if ext is not None else None
        if ext is None or access_key is None:
            raise AclDenied("No accessKey is configured", where.VALIDATE_NO_ACCESS_KEY)
        account = snapshot.accounts.get(access_key)
        if account is None:
            raise AclDenied(f"No acl config for {access_key}", where.VALIDATE_UNKNOWN_KEY)
        if account.white(address):
            return
        expected = compute_signature(account.secret_key, ext, request.body, _UNSIGNED)
        if expected != ext.get(SIGNATURE):
            raise AclDenied(
                f"Check signature failed for accessKey={access_key}", where.VALIDATE_SIGNATURE
            )
        if dict(needed).get(TRACE_TOPIC) == PUB:
            return  # message traces are always let in
        _check_perm(request.code, needed, account)

    def permit(self, access_key: str, needed: list[tuple[str, int]], address: str) -> None:
        """The checks after the signature, for a caller already authenticated elsewhere (a
        gRPC client at the broker's front): white lists for its address, then `needed`."""
        snapshot = self.snapshot
        if any(white(address) for white in snapshot.global_white):
            return
        account = snapshot.accounts.get(access_key)
        if account is None:
            raise AclDenied(f"No acl config for {access_key}", where.VALIDATE_UNKNOWN_KEY)
        if account.white(address):
            return
        _check_perm(0, needed, account)

    # -- reload ---------------------------------------------------------------------------------
    async def watch(self, interval_s: float = WATCH_INTERVAL_S) -> None:
        """Reload when a file changes, appears or goes (stat and read off the loop)."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval_s)
            try:
                await loop.run_in_executor(None, self.reload_if_changed)
            except Exception as exc:  # keep watching whatever one reload met
                log.error("acl.watch_failed", error=repr(exc), exc_info=exc)

    def reload_if_changed(self) -> bool:
        stamps = self.files.stamps()
        if stamps == self._stamps:
            return False
        self._stamps = stamps
        self.reload()
        return True

    def reload(self) -> None:
        """Read the files again; a file RocketMQ would refuse leaves the last good state."""
        try:
            snapshot = self.files.load()
        except AclConfigError as exc:
            log.error("acl.reload_refused", error=str(exc))
            return
        self.snapshot = snapshot
        self._stamps = self.files.stamps()
        log.info("acl.reloaded", accounts=len(snapshot.accounts))


def _check_perm(code: int, needed: list[tuple[str, int]], account: Account) -> None:
    if code in ADMIN_CODES and not account.admin:
        raise AclDenied(
            f"Need admin permission for request code={code}, "
            f"but accessKey={account.access_key} is not",
            where.CHECK_ADMIN,
        )
    if not needed or (not account.perms and account.admin):
        return
    for resource, perm in needed:
        owned = account.perms.get(resource)
        if owned is None:
            default = (
                account.default_group_perm if is_group(resource) else account.default_topic_perm
            )
            if not check_permission(perm, default):
                raise AclDenied(
                    f"No default permission for {describe(resource)}", where.CHECK_DEFAULT_PERM
                )
        elif not check_permission(perm, owned):
            raise AclDenied(
                f"No default permission for {describe(resource)}", where.CHECK_RESOURCE_PERM
            )

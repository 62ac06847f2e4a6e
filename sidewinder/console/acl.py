"""What the console shows and changes of ACL 1.0: per broker, whether ACL is on, its global white
addresses and its accounts; an account created or changed, an account deleted, the global white
list replaced (request codes 50, 51 and 53; the list itself is code 54).

    view = AclView(Admin("127.0.0.1:9876", access_key="AclAdmin1", secret_key="..."), cluster)
    brokers = await view.brokers()                              # secret keys masked
    await view.save_account(AccountForm.of({"access_key": "app1", "secret_key": "..."}), "")

Whether a broker runs ACL comes from its config (GET_BROKER_CONFIG's aclEnable), so a broker
without it is shown as such at once: RocketMQ 4.9.7's never answers code 54 there. Secret keys
stay in the console: the broker sends them with every account, the pages and the API show a
mask. A change names one broker, or none for every broker with ACL on; a blank secret key or
a blank setting keeps what the broker holds, as code 50 itself keeps settings it is not given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sidewinder.client.admin import Admin
from sidewinder.client.admin_acl import (
    AccessConfig,
    broker_acl_config,
    delete_access_config,
    update_access_config,
    update_global_white_addrs,
)
from sidewinder.console.calls import fan_out
from sidewinder.console.cluster import ClusterView, registered_brokers

SECRET_MASK = "********"  # one length for every key: the mask says nothing of the secret
PERMS = ("DENY", "PUB", "SUB", "PUB|SUB")
_SEPARATORS = re.compile(r"[,\s]+")


@dataclass
class AclBroker:
    cluster: str
    name: str
    broker_id: int
    addr: str
    role: str
    acl_enabled: bool | None = None  # None: the broker did not say (see error)
    error: str | None = None
    global_white_addrs: list[str] = field(default_factory=list)
    accounts: list[dict[str, Any]] = field(default_factory=list)


def account_row(config: AccessConfig) -> dict[str, Any]:
    """An account as the page and the API show it: everything but its secret key."""
    return {
        "access_key": config.access_key,
        "secret_key": SECRET_MASK,
        "white_remote_address": config.white_remote_address or "",
        "admin": config.admin,
        "default_topic_perm": config.default_topic_perm or "",
        "default_group_perm": config.default_group_perm or "",
        "topic_perms": list(config.topic_perms or ()),
        "group_perms": list(config.group_perms or ()),
    }


def split_list(text: str) -> tuple[str, ...]:
    """A form's list: entries separated by commas, spaces or new lines."""
    return tuple(item for item in _SEPARATORS.split(text.strip()) if item)


def _perm(fields: Mapping[str, str], name: str) -> str:
    value = fields.get(name, "").strip()
    if value and value not in PERMS:
        raise ValueError(f"{name} {value!r}: one of {', '.join(PERMS)}, or empty to keep")
    return value


@dataclass(frozen=True)
class AccountForm:
    """The account form's fields; empty ones keep what the broker holds."""

    access_key: str
    secret_key: str = ""
    white_remote_address: str = ""
    admin: str = ""  # "true", "false", or "" to keep
    default_topic_perm: str = ""
    default_group_perm: str = ""
    topic_perms: tuple[str, ...] = ()
    group_perms: tuple[str, ...] = ()

    @classmethod
    def of(cls, fields: Mapping[str, str]) -> AccountForm:
        access_key = fields.get("access_key", "").strip()
        if not access_key:
            raise ValueError("the form has no access_key")
        admin = fields.get("admin", "").strip().lower()
        if admin not in ("", "true", "false"):
            raise ValueError(f"admin {admin!r}: true, false, or empty to keep")
        return cls(
            access_key=access_key,
            secret_key=fields.get("secret_key", "").strip(),
            white_remote_address=fields.get("white_remote_address", "").strip(),
            admin=admin,
            default_topic_perm=_perm(fields, "default_topic_perm"),
            default_group_perm=_perm(fields, "default_group_perm"),
            topic_perms=split_list(fields.get("topic_perms", "")),
            group_perms=split_list(fields.get("group_perms", "")),
        )

    def config(self, current: AccessConfig | None, broker: str) -> AccessConfig:
        """What code 50 carries for one broker, given the account it holds (None: a new one).
        The broker needs the secret key every time: a blank one sends the broker's own."""
        secret = self.secret_key or (current.secret_key if current else None)
        if not secret:
            raise ValueError(f"{self.access_key} is a new account on {broker}: give a secret key")
        keep_admin = current.admin if current else False
        return AccessConfig(
            access_key=self.access_key,
            secret_key=secret,
            white_remote_address=self.white_remote_address or None,
            admin={"true": True, "false": False}.get(self.admin, keep_admin),
            default_topic_perm=self.default_topic_perm or None,
            default_group_perm=self.default_group_perm or None,
            topic_perms=self.topic_perms or None,
            group_perms=self.group_perms or None,
        )


class AclView:
    def __init__(self, admin: Admin, cluster: ClusterView) -> None:
        self.admin = admin
        self.cluster = cluster

    async def brokers(self) -> list[AclBroker]:
        """Every registered broker: ACL on or off (from its config), and when on, its white
        list and accounts (code 54), secret keys masked."""
        info = await self.cluster.cluster_info()
        rows = [
            AclBroker(b.cluster, b.name, b.broker_id, b.addr, b.role)
            for b in registered_brokers(info)
        ]
        configs = await fan_out({r.addr: self.admin.broker_config(r.addr) for r in rows})
        for row in rows:
            outcome = configs[row.addr]
            if outcome.ok and outcome.value is not None:
                row.acl_enabled = outcome.value.get("aclEnable", "false").lower() == "true"
            else:
                row.error = outcome.error
        on = [r for r in rows if r.acl_enabled]
        acls = await fan_out({r.addr: broker_acl_config(self.admin, r.addr) for r in on})
        for row in on:
            found = acls[row.addr]
            if found.ok and found.value is not None:
                row.global_white_addrs = [a for a in found.value.global_white_addrs if a]
                row.accounts = [account_row(a) for a in found.value.accounts]
            else:
                row.error = found.error
        return rows

    async def _targets(self, broker: str) -> list[str]:
        """The broker named (it must be registered), or every broker with ACL on."""
        rows = registered_brokers(await self.cluster.cluster_info())
        if broker:
            if broker not in {r.addr for r in rows}:
                raise LookupError(f"no broker {broker} is registered with the name server")
            return [broker]
        addrs = [r.addr for r in await self.brokers() if r.acl_enabled]
        if not addrs:
            raise LookupError("no broker has ACL on")
        return addrs

    async def save_account(self, form: AccountForm, broker: str) -> list[str]:
        """UPDATE_AND_CREATE_ACL_CONFIG on the broker(s); each one's current account fills
        in a blank secret key and admin choice. Nothing is sent unless every broker's
        request can be made (a new account without a secret key on one of them)."""
        addrs = await self._targets(broker)
        configs = {}
        for addr in addrs:
            current = (await broker_acl_config(self.admin, addr)).account(form.access_key)
            configs[addr] = form.config(current, addr)
        for addr, config in configs.items():
            await update_access_config(self.admin, addr, config)
        return addrs

    async def delete_account(self, access_key: str, broker: str) -> list[str]:
        """DELETE_ACL_CONFIG on the broker named, or on every broker with ACL on that holds
        the account."""
        addrs = await self._targets(broker)
        if not broker:
            configs = {a: await broker_acl_config(self.admin, a) for a in addrs}
            addrs = [a for a in addrs if configs[a].account(access_key) is not None]
            if not addrs:
                raise LookupError(f"no broker holds an account {access_key}")
        for addr in addrs:
            await delete_access_config(self.admin, addr, access_key)
        return addrs

    async def update_white_list(self, addresses: tuple[str, ...], broker: str) -> list[str]:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: the list of each broker's plain_acl.yml becomes
        `addresses` (the white lists of its files under conf/acl/ stay as they are)."""
        addrs = await self._targets(broker)
        for addr in addrs:
            await update_global_white_addrs(self.admin, addr, ",".join(addresses))
        return addrs

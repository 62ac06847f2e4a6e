"""RocketMQ 4.9's ACL permissions: DENY, ANY, PUB, SUB bits, their names, the admin codes.

    parse_perm("PUB|SUB") == PUB | SUB
    check_permission(needed=SUB, owned=PUB | SUB)   # True
    resource_perms(["groupA=SUB"], group=True) == {"%RETRY%groupA": SUB}

Group permissions are kept under the group's retry topic (`%RETRY%group`), as RocketMQ keeps
them, so one map holds topics and groups alike.
"""

from __future__ import annotations

from sidewinder.acl.errors import AclConfigError
from sidewinder.protocol.acl import ANY as ANY
from sidewinder.protocol.acl import DENY as DENY
from sidewinder.protocol.acl import PUB as PUB
from sidewinder.protocol.acl import RETRY_PREFIX as RETRY_PREFIX
from sidewinder.protocol.acl import SUB as SUB
from sidewinder.protocol.codes import RequestCode

# Permission.ADMIN_CODE: only an admin account may send these.
ROCKETMQ_ADMIN_CODES = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
    }
)
# A departure from RocketMQ 4.9: there any account that passes the check may change the ACL
# files (create an admin account for itself) and read every secret key. Here only admin
# accounts may; the tools that send these codes are run with an admin account anyway.
ACL_ADMIN_CODES = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
        RequestCode.DELETE_ACL_CONFIG,
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,
    }
)
ADMIN_CODES = ROCKETMQ_ADMIN_CODES | ACL_ADMIN_CODES

_NAMES = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}


def parse_perm(text: str | None) -> int:
    """A permission's name; anything unknown (or none) is DENY."""
    if text is None:
        return DENY
    return _NAMES.get(text.strip(), DENY)


def check_permission(needed: int, owned: int) -> bool:
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def is_group(resource: str) -> bool:
    return resource.startswith(RETRY_PREFIX)


def describe(resource: str) -> str:
    """PlainAccessResource.printStr: `group:G` for a retry topic, else `topic:T`."""
    if is_group(resource):
        return f"group:{resource[len(RETRY_PREFIX) :]}"
    return f"topic:{resource}"


def _split_pair(entry: str) -> list[str]:
    return [piece for piece in entry.split("=") if piece]


def resource_perms(entries: list[str] | None, *, group: bool) -> dict[str, int]:
    """An account's `topicPerms` or `groupPerms` ("name=PERM" each) as resource -> perm."""
    perms: dict[str, int] = {}
    for entry in entries or []:
        items = _split_pair(entry)
        if len(items) != 2:
            kind = "group" if group else "topic"
            raise AclConfigError(f"Parse resource permission failed for {kind}:{entry}")
        name = items[0].strip()
        perms[retry_topic(name) if group else name] = parse_perm(items[1])
    return perms


def check_resource_perms(entries: list[str] | None) -> None:
    """Permission.checkResourcePerms: what updateAclConfig refuses, with RocketMQ's words."""
    for entry in entries or []:
        items = _split_pair(entry)
        if len(items) != 2:
            raise AclConfigError(
                f"Parse Resource format error for {entry}.\n"
                "The expected resource format is 'Res=Perm'. For example: topicA=SUB"
            )
        if items[1].strip() != "DENY" and parse_perm(items[1]) == DENY:
            raise AclConfigError(
                f"Parse resource permission error for {entry}.\n"
                "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'."
            )

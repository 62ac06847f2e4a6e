"""What a request needs the ACL to allow, by request code (PlainAccessValidator.parse).

    needed = needed_perms(request)   # {"TopicA": PUB} for a send to TopicA

Only the codes RocketMQ 4.9 maps name resources; every other code needs only a valid signature
(and, for the admin codes, an admin account). Field names are RocketMQ's, quirks included: a
SEND_MESSAGE to a retry topic names the group by the `group` field, which its header lacks, so
it needs nothing. The order is Java's HashMap order, so the first refusal is RocketMQ's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from sidewinder.acl.errors import PARSE_REQUEST, AclDenied
from sidewinder.acl.permission import PUB, SUB, is_group, retry_topic
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode as R
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.message import java_string_hash

Needed = dict[str, int]
V = TypeVar("V")


def _add(needed: Needed, resource: str | None, perm: int) -> None:
    if resource is not None:
        needed[resource] = perm


def _retry(group: str | None) -> str | None:
    return None if group is None else retry_topic(group)


def _required(ext: Mapping[str, str], *names: str) -> list[str]:
    """Header fields RocketMQ's decodeCommandCustomHeader insists on (@CFNotNull)."""
    for name in names:
        if ext.get(name) is None:
            raise AclDenied(f"the custom field <{name}> is null", PARSE_REQUEST)
    return [ext[name] for name in names]


def _send(topic_field: str, group_field: str) -> Callable[[RemotingCommand], Needed]:
    def needed(request: RemotingCommand) -> Needed:
        ext = request.ext_fields or {}
        out: Needed = {}
        topic = ext.get(topic_field)
        if topic is not None and is_group(topic):
            _add(out, _retry(ext.get(group_field)), SUB)
        else:
            _add(out, topic, PUB)
        return out

    return needed


def _send_back(request: RemotingCommand) -> Needed:
    out: Needed = {}
    _add(out, _retry((request.ext_fields or {}).get("group")), SUB)
    return out


def _pull(request: RemotingCommand) -> Needed:
    ext = request.ext_fields or {}
    out: Needed = {}
    _add(out, ext.get("topic"), SUB)
    _add(out, _retry(ext.get("consumerGroup")), SUB)
    return out


def _recall(request: RemotingCommand) -> Needed:
    """RocketMQ 5 marks RECALL_MESSAGE a PUB action on its topic."""
    out: Needed = {}
    _add(out, (request.ext_fields or {}).get("topic"), PUB)
    return out


def _query(request: RemotingCommand) -> Needed:
    out: Needed = {}
    _add(out, (request.ext_fields or {}).get("topic"), SUB)
    return out


def _heartbeat(request: RemotingCommand) -> Needed:
    out: Needed = {}
    try:
        data = body.loads(request.body_bytes) if request.body else {}
        for consumer in data.get("consumerDataSet") or []:
            _add(out, _retry(consumer.get("groupName")), SUB)
            for subscription in consumer.get("subscriptionDataSet") or []:
                _add(out, subscription.get("topic"), SUB)
    except (ValueError, AttributeError, TypeError) as exc:
        raise AclDenied(f"the heartbeat body does not decode: {exc}", PARSE_REQUEST) from None
    return out


def _unregister(request: RemotingCommand) -> Needed:
    ext = request.ext_fields or {}
    _required(ext, "clientID")
    out: Needed = {}
    _add(out, _retry(ext.get("consumerGroup")), SUB)
    return out


def _consumer_list(request: RemotingCommand) -> Needed:
    (group,) = _required(request.ext_fields or {}, "consumerGroup")
    return {retry_topic(group): SUB}


def _update_offset(request: RemotingCommand) -> Needed:
    ext = request.ext_fields or {}
    group, topic, _, _ = _required(ext, "consumerGroup", "topic", "queueId", "commitOffset")
    return {retry_topic(group): SUB, topic: SUB}


_BY_CODE: dict[int, Callable[[RemotingCommand], Needed]] = {
    R.SEND_MESSAGE: _send("topic", "group"),
    R.SEND_MESSAGE_V2: _send("b", "a"),
    R.CONSUMER_SEND_MSG_BACK: _send_back,
    R.PULL_MESSAGE: _pull,
    R.QUERY_MESSAGE: _query,
    R.HEART_BEAT: _heartbeat,
    R.UNREGISTER_CLIENT: _unregister,
    R.GET_CONSUMER_LIST_BY_GROUP: _consumer_list,
    R.UPDATE_CONSUMER_OFFSET: _update_offset,
    R.RECALL_MESSAGE: _recall,
}


def needed_perms(request: RemotingCommand) -> list[tuple[str, int]]:
    """The resources the request touches and the permission each needs, in the order
    RocketMQ checks them."""
    parse = _BY_CODE.get(request.code)
    if parse is None:
        return []
    return java_hash_map_order(parse(request))


def java_hash_map_order(entries: Mapping[str, V]) -> list[tuple[str, V]]:
    """The iteration order of a java.util.HashMap filled with these entries in this order:
    by bucket (the spread hash masked by the table size, 16 doubled past 3/4 full), then by
    insertion within a bucket."""
    capacity = 16
    while len(entries) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    keyed = [(bucket(key), n, key, perm) for n, (key, perm) in enumerate(entries.items())]
    return [(key, perm) for _, _, key, perm in sorted(keyed)]

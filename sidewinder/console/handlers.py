"""The console's page and action handlers: each takes the request and answers plain data,
which plumbing.page renders (or answers as JSON) and plumbing.action turns into a redirect.

    async def topics(request: Request) -> dict[str, Any]: ...
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sidewinder.client.admin_groups import message_tracks
from sidewinder.client.producer import Message
from sidewinder.client.pulling import ReceivedMessage
from sidewinder.client.route_cache import ClientError
from sidewinder.console.acl import PERMS, AccountForm, split_list
from sidewinder.console.calls import guarded
from sidewinder.console.cluster import TOPIC_KINDS
from sidewinder.console.groups import GROUP_SORTS
from sidewinder.console.messages import message_json
from sidewinder.console.plumbing import (
    console_of,
    error_response,
    field,
    param,
    parse_local_time,
    refusal,
)
from sidewinder.remoting.connection import RemotingError


async def overview(request: Request) -> dict[str, Any]:
    console = console_of(request)
    data = (await console.cluster.overview()).as_json()
    data["tps"] = {c: console.sampler.chart("cluster", c) for c in data["clusters"]}
    return data


async def topics(request: Request) -> dict[str, Any]:
    kind = request.query_params.get("kind", "")
    search = request.query_params.get("q", "")
    if kind and kind not in TOPIC_KINDS:
        raise ValueError(f"kind {kind!r}: one of {', '.join(TOPIC_KINDS)}")
    console = console_of(request)
    rows = await console.cluster.topics(kind or None, search)
    return {
        "topics": [asdict(r) for r in rows],
        "kind": kind,
        "q": search,
        "kinds": list(TOPIC_KINDS),
        "clusters": await console.cluster.clusters(),
    }


async def topic(request: Request) -> dict[str, Any]:
    console = console_of(request)
    data = await console.cluster.topic_detail(param(request, "name"))
    data["clusters"] = await console.cluster.clusters()
    return data


async def producers(request: Request) -> dict[str, Any]:
    return await console_of(request).cluster.producers()


async def groups(request: Request) -> dict[str, Any]:
    sort = request.query_params.get("sort", "lag")
    if sort not in GROUP_SORTS:
        raise ValueError(f"sort {sort!r}: one of {', '.join(GROUP_SORTS)}")
    descending = request.query_params.get("order", "desc") != "asc"
    search = request.query_params.get("q", "")
    rows = await console_of(request).groups.groups(sort, descending, search)
    return {
        "groups": [asdict(r) for r in rows],
        "sort": sort,
        "order": "desc" if descending else "asc",
        "q": search,
        "total_lag": sum(r.lag for r in rows),
    }


async def group(request: Request) -> dict[str, Any]:
    """One group; from now on for an hour the console samples its lag for the chart."""
    console, name = console_of(request), param(request, "name")
    data = await console.groups.group_detail(name)
    console.sampler.watch(name, data["lag"] if not data["queues_error"] else None)
    data["lag_chart"] = console.sampler.chart("group", name)
    return data


async def messages(request: Request) -> dict[str, Any]:
    """One of three searches, by what the query names: a message id, a key, or a time range."""
    params = request.query_params
    topic_name, key, msg_id = params.get("topic", ""), params.get("key", ""), params.get("id", "")
    view = console_of(request).messages
    found: list[ReceivedMessage] = []
    errors: list[str] = []
    mode = ""
    if msg_id:
        mode, found = "id", await view.by_id(msg_id.strip(), topic_name)
    elif topic_name and key:
        mode, found = "key", await view.by_key(topic_name, key)
    elif topic_name:
        begin, end = parse_local_time(params.get("begin")), parse_local_time(params.get("end"))
        mode = "time"
        found, errors = await view.by_time(topic_name, begin, end)
    return {
        "mode": mode,
        "topic": topic_name,
        "key": key,
        "id": msg_id,
        "begin": params.get("begin", ""),
        "end": params.get("end", ""),
        "messages": [message_json(m) for m in found],
        "errors": errors,
    }


async def message(request: Request) -> dict[str, Any]:
    params = request.query_params
    view = console_of(request).messages
    msg_id = param(request, "id")
    found = await view.by_id(msg_id, params.get("topic", ""))
    if not found:
        raise LookupError(f"no message {msg_id}")
    shown = message_json(found[0], with_body=True)
    tracks = await guarded(message_tracks(view.admin, found[0]))
    return {
        "message": shown,
        "group": params.get("group", ""),
        "tracks": [asdict(t) for t in tracks.value or []],
        "tracks_error": tracks.error,
    }


async def dlq(request: Request) -> dict[str, Any]:
    name = request.query_params.get("group", "")
    console = console_of(request)
    found = await console.messages.dead_letters(name) if name else []
    clients: list[dict[str, Any]] = []
    if name:
        clients = (await console.groups.group_detail(name))["connections"]
    return {
        "group": name,
        "messages": [message_json(m) for m in found],
        "clients": clients,
    }


async def export_dead_letters(request: Request) -> Response:
    """A group's dead letters as JSON lines, each with its body in base64 and as shown."""
    refused = refusal(request, change=False)
    if refused is not None:
        return refused
    name = request.query_params.get("group", "")
    if not name:
        return JSONResponse({"error": "no group given"}, 400)
    try:
        found = await console_of(request).messages.dead_letters(name)
    except (ClientError, RemotingError, OSError) as exc:
        return error_response(request, exc, 502)
    lines = []
    for m in found:
        shown = message_json(m, with_body=True)
        shown["body_base64"] = base64.b64encode(m.body).decode()
        lines.append(json.dumps(shown, ensure_ascii=False))
    disposition = f'attachment; filename="dlq-{quote(name)}.jsonl"'
    return Response(
        "".join(line + "\n" for line in lines),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": disposition},
    )


async def save_topic(request: Request) -> dict[str, Any]:
    name = field(request, "name")
    fields = request.state.fields
    queues = int(fields.get("queues") or 8)
    perm = int(fields.get("perm") or 6)
    order = fields.get("order", "") in ("on", "true", "1")
    attributes = fields.get("attributes", "").strip() or None
    brokers = await console_of(request).cluster.save_topic(
        name, field(request, "cluster"), queues, perm, order, attributes
    )
    return {
        "topic": name,
        "brokers": brokers,
        "notice": f"topic {name} saved on {len(brokers)} broker(s)",
        "redirect": "/topic?" + urlencode({"name": name}),
    }


async def delete_topic(request: Request) -> dict[str, Any]:
    name = field(request, "name")
    await console_of(request).cluster.delete_topic(name, field(request, "cluster"))
    return {"topic": name, "notice": f"topic {name} deleted", "redirect": "/topics"}


async def send_message(request: Request) -> dict[str, Any]:
    """A test message to a topic, from the console's own producer group."""
    name = field(request, "topic")
    fields = request.state.fields
    message = Message(
        name,
        fields.get("body", "").encode(),
        tags=fields.get("tags") or None,
        keys=fields.get("keys", "").split(),
    )
    sent = await console_of(request).producer.send(message)
    return {
        "topic": name,
        "status": sent.status,
        "msg_id": sent.msg_id,
        "offset_msg_id": sent.offset_msg_id,
        "notice": f"sent {sent.msg_id} to {name}: {sent.status}",
        "redirect": "/topic?" + urlencode({"name": name}),
    }


async def reset_offset(request: Request) -> dict[str, Any]:
    name, topic_name = field(request, "group"), field(request, "topic")
    when = request.state.fields.get("time") or request.state.fields.get("time_at", "")
    timestamp_ms = {"earliest": 0, "latest": -1}.get(when)
    if timestamp_ms is None:
        timestamp_ms = parse_local_time(when) or -1
    rows = await console_of(request).groups.reset_offset(name, topic_name, timestamp_ms)
    return {
        "group": name,
        "topic": topic_name,
        "offsets": rows,
        "notice": f"{name} reset on {topic_name}: {len(rows)} queue(s)",
        "redirect": "/group?" + urlencode({"name": name}),
    }


async def delete_group(request: Request) -> dict[str, Any]:
    name = field(request, "group")
    brokers = await console_of(request).groups.delete_group(name)
    return {
        "group": name,
        "brokers": brokers,
        "notice": f"group {name} deleted",
        "redirect": "/groups",
    }


async def resend(request: Request) -> dict[str, Any]:
    """A message again: to one connected client of the group (CONSUME_MESSAGE_DIRECTLY) when
    the form names one, or says mode=direct (then the group's first client); else sent anew
    to its original topic (a dead letter's)."""
    name, msg_id = field(request, "group"), field(request, "msg_id")
    console = console_of(request)
    view = console.messages
    fields = request.state.fields
    client_id = fields.get("client_id", "")
    back = fields.get("back") or "/dlq?" + urlencode({"group": name})
    if not client_id and fields.get("mode") == "direct":
        clients = (await console.groups.group_detail(name))["connections"]
        if not clients:
            raise LookupError(f"no client of {name} is connected")
        client_id = clients[0]["client_id"]
    if client_id:
        answer = await view.consume_directly(name, client_id, msg_id)
        outcome = answer.get("consumeResult", "?")
        return {
            "answer": answer,
            "notice": f"{msg_id} consumed by {client_id}: {outcome}",
            "redirect": back,
        }
    found = await view.by_id(msg_id)
    if not found:
        raise LookupError(f"no message {msg_id}")
    sent = await view.resend(found[0])
    return {"sent": sent, "notice": f"{msg_id} sent again to {sent['topic']}", "redirect": back}


async def acl(request: Request) -> dict[str, Any]:
    """Per broker: ACL on or off, its global white list and its accounts (secrets masked)."""
    rows = await console_of(request).acl.brokers()
    return {
        "brokers": [asdict(r) for r in rows],
        "acl_brokers": [r.addr for r in rows if r.acl_enabled],
        "perms": list(PERMS),
    }


def _brokers_said(addrs: list[str]) -> str:
    return addrs[0] if len(addrs) == 1 else f"{len(addrs)} brokers"


async def save_account(request: Request) -> dict[str, Any]:
    fields = request.state.fields
    form = AccountForm.of(fields)
    brokers = await console_of(request).acl.save_account(form, fields.get("broker", ""))
    return {
        "access_key": form.access_key,
        "brokers": brokers,
        "notice": f"account {form.access_key} saved on {_brokers_said(brokers)}",
        "redirect": "/acl",
    }


async def delete_account(request: Request) -> dict[str, Any]:
    access_key = field(request, "access_key")
    broker = request.state.fields.get("broker", "")
    brokers = await console_of(request).acl.delete_account(access_key, broker)
    return {
        "access_key": access_key,
        "brokers": brokers,
        "notice": f"account {access_key} deleted on {_brokers_said(brokers)}",
        "redirect": "/acl",
    }


async def update_white_list(request: Request) -> dict[str, Any]:
    fields = request.state.fields
    addresses = split_list(fields.get("addresses", ""))
    brokers = await console_of(request).acl.update_white_list(addresses, fields.get("broker", ""))
    listed = ", ".join(addresses) or "none"
    return {
        "addresses": list(addresses),
        "brokers": brokers,
        "notice": f"global white list of {_brokers_said(brokers)}: {listed}",
        "redirect": "/acl",
    }

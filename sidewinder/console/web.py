"""The console's web application: server-rendered pages, each with its JSON twin under /api/.

    app = create_app("127.0.0.1:9876")
    uvicorn.run(app, host="127.0.0.1", port=8080)

GET /topics renders a page; GET /api/topics answers the same data as JSON. Every change is a
POST carrying the CSRF token (a form field, or the X-CSRF-Token header for the API) that
matches the console's cookie; pages escape everything they show (Jinja autoescape).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hmac
import json
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from sidewinder.client.admin import Admin
from sidewinder.client.producer import Message, Producer
from sidewinder.client.pulling import ReceivedMessage
from sidewinder.client.route_cache import ClientError
from sidewinder.console.calls import describe_error
from sidewinder.console.cluster import TOPIC_KINDS, ClusterView
from sidewinder.console.groups import GROUP_SORTS, GroupView
from sidewinder.console.messages import MessageView, message_json, render_body
from sidewinder.console.sampler import TpsSampler
from sidewinder.remoting.connection import RemotingError

HERE = Path(__file__).parent
CSRF_COOKIE = "mqconsole_csrf"
CSRF_HEADER = "x-csrf-token"
PRODUCER_GROUP = "MQCONSOLE_PRODUCER"

Handler = Callable[[Request], Awaitable[dict[str, Any]]]


class Console:
    """What the handlers share: one Admin, one producer (for resends), the views."""

    def __init__(
        self,
        namesrv: str,
        access_key: str | None,
        secret_key: str | None,
        sample_interval_s: float = 10.0,
    ) -> None:
        self.namesrv = namesrv
        self.admin = Admin(namesrv, access_key=access_key, secret_key=secret_key)
        self.producer = Producer(
            PRODUCER_GROUP, namesrv, access_key=access_key, secret_key=secret_key
        )
        self.cluster = ClusterView(self.admin, namesrv)
        self.groups = GroupView(self.admin, self.cluster)
        self.messages = MessageView(self.admin, self.producer)
        self.sampler = TpsSampler(self.cluster, sample_interval_s)
        self.sampling: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.sampling = asyncio.create_task(self.sampler.run())

    async def close(self) -> None:
        if self.sampling is not None:
            self.sampling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.sampling
        await self.producer.close()
        await self.admin.close()


def format_ms(value: int | None) -> str:
    if not value or value <= 0:
        return "-"
    return datetime.fromtimestamp(value / 1000).strftime("%Y-%m-%d %H:%M:%S")


def parse_local_time(value: str | None) -> int | None:
    """A datetime-local field ("2024-01-02T03:04[:05]") as epoch milliseconds, local time."""
    if not value:
        return None
    return int(datetime.fromisoformat(value).timestamp() * 1000)


def templates() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html"], default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ms"] = format_ms
    env.filters["perm"] = lambda p: ("R" if p & 4 else "-") + ("W" if p & 2 else "-")
    env.filters["pct"] = lambda r: "-" if r is None else f"{float(r) * 100:.1f}%"
    env.globals["qs"] = lambda **kw: urlencode({k: v for k, v in kw.items() if v})
    return env


def csrf_token(request: Request) -> str:
    token = request.cookies.get(CSRF_COOKIE) or request.scope.get("mqconsole.csrf")
    if not token:
        token = secrets.token_urlsafe(24)
        request.scope["mqconsole.csrf"] = token
    return str(token)


async def check_csrf(request: Request) -> dict[str, str]:
    """The POST's form (or JSON) fields, once its token matches the cookie's."""
    if request.headers.get("content-type", "").startswith("application/json"):
        fields = {k: str(v) for k, v in (await request.json()).items()}
    else:
        fields = {k: str(v) for k, v in (await request.form()).items()}
    cookie = request.cookies.get(CSRF_COOKIE, "")
    sent = request.headers.get(CSRF_HEADER) or fields.get("csrf_token", "")
    if not cookie or not hmac.compare_digest(cookie, sent):
        raise PermissionError("missing or wrong CSRF token: reload the page and try again")
    return fields


def is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def with_cookie(request: Request, response: Response) -> Response:
    if CSRF_COOKIE not in request.cookies:
        response.set_cookie(CSRF_COOKIE, csrf_token(request), httponly=True, samesite="strict")
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"
    )
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def page(template: str, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A GET answering the handler's data as a page, or as JSON under /api/."""

    async def endpoint(request: Request) -> Response:
        started = time.perf_counter()
        try:
            data = await handler(request)
        except (LookupError, ClientError, RemotingError, OSError, ValueError) as exc:
            return error_response(request, exc, 502)
        if is_api(request):
            return with_cookie(request, JSONResponse(data))
        data["render_ms"] = round((time.perf_counter() - started) * 1000)
        return render(request, template, data)

    return endpoint


def render(request: Request, template: str, data: dict[str, Any], status: int = 200) -> Response:
    env: Environment = request.app.state.templates
    html = env.get_template(template).render(
        data=data,
        request=request,
        path=request.url.path,
        csrf_token=csrf_token(request),
        notice=request.query_params.get("notice", ""),
        failure=request.query_params.get("failure", ""),
        namesrv=request.app.state.console.namesrv,
    )
    return with_cookie(request, HTMLResponse(html, status))


def error_response(request: Request, exc: BaseException, status: int) -> Response:
    plain = isinstance(exc, LookupError | ValueError | PermissionError)
    message = str(exc) if plain else describe_error(exc)
    if is_api(request):
        return JSONResponse({"error": message}, status)
    return render(request, "error.html", {"error": message}, status)


def action(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A POST: CSRF checked; JSON under /api/, else a redirect to where the handler says."""

    async def endpoint(request: Request) -> Response:
        try:
            fields = await check_csrf(request)
        except PermissionError as exc:
            return error_response(request, exc, 403)
        request.state.fields = fields
        try:
            result = await handler(request)
        except (ClientError, RemotingError, OSError, ValueError, LookupError) as exc:
            if is_api(request):
                return error_response(request, exc, 400)
            back = fields.get("back") or "/"
            return redirect(
                back, failure=describe_error(exc) if isinstance(exc, ClientError) else str(exc)
            )
        if is_api(request):
            return JSONResponse(result)
        return redirect(result.pop("redirect", "/"), notice=result.get("notice", "done"))

    return endpoint


def redirect(target: str, **params: str) -> RedirectResponse:
    if not target.startswith("/") or target.startswith("//"):
        target = "/"
    sep = "&" if "?" in target else "?"
    return RedirectResponse(f"{target}{sep}{urlencode(params)}", status_code=303)


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


# -- pages -----------------------------------------------------------------------------------
async def overview(request: Request) -> dict[str, Any]:
    console = console_of(request)
    data = (await console.cluster.overview()).as_json()
    data["tps"] = {cluster: console.sampler.chart(cluster) for cluster in data["clusters"]}
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
    data = await console.cluster.topic_detail(request.query_params["name"])
    data["clusters"] = await console.cluster.clusters()
    return data


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
    return await console_of(request).groups.group_detail(request.query_params["name"])


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
    found = await view.by_id(params["id"], params.get("topic", ""))
    if not found:
        raise LookupError(f"no message {params['id']}")
    shown = message_json(found[0], with_body=True)
    return {"message": shown, "group": params.get("group", "")}


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


# -- actions ---------------------------------------------------------------------------------
def field(request: Request, name: str) -> str:
    value = str(request.state.fields.get(name, "")).strip()
    if not value:
        raise ValueError(f"the form has no {name}")
    return value


async def save_topic(request: Request) -> dict[str, Any]:
    name = field(request, "name")
    fields = request.state.fields
    queues = int(fields.get("queues") or 8)
    perm = int(fields.get("perm") or 6)
    order = fields.get("order", "") in ("on", "true", "1")
    brokers = await console_of(request).cluster.save_topic(
        name, field(request, "cluster"), queues, perm, order
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
    """A dead letter again: to one connected client (CONSUME_MESSAGE_DIRECTLY) when the form
    names one, else sent anew to its original topic."""
    name, msg_id = field(request, "group"), field(request, "msg_id")
    view = console_of(request).messages
    client_id = request.state.fields.get("client_id", "")
    back = "/dlq?" + urlencode({"group": name})
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


def routes() -> list[Route | Mount]:
    pages = [
        ("/", "overview", "overview.html", overview),
        ("/topics", "topics", "topics.html", topics),
        ("/topic", "topic", "topic.html", topic),
        ("/groups", "groups", "groups.html", groups),
        ("/group", "group", "group.html", group),
        ("/messages", "messages", "messages.html", messages),
        ("/message", "message", "message.html", message),
        ("/dlq", "dlq", "dlq.html", dlq),
    ]
    actions = [
        ("/topics/save", save_topic),
        ("/topics/delete", delete_topic),
        ("/topic/send", send_message),
        ("/group/reset", reset_offset),
        ("/group/delete", delete_group),
        ("/dlq/resend", resend),
    ]
    table: list[Route | Mount] = []
    for path, name, template, handler in pages:
        endpoint = page(template, handler)
        table.append(Route(path, endpoint, name=name))
        table.append(Route("/api" + (path if path != "/" else "/overview"), endpoint))
    for path, handler in actions:
        table.append(Route(path, action(handler), methods=["POST"]))
        table.append(Route("/api" + path, action(handler), methods=["POST"]))
    table.append(Route("/api/dlq/export", export_dead_letters))
    table.append(Mount("/static", StaticFiles(directory=HERE / "static"), name="static"))
    return table


def create_app(
    namesrv: str,
    *,
    access_key: str | None = None,
    secret_key: str | None = None,
    sample_interval_s: float = 10.0,
) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.console = Console(namesrv, access_key, secret_key, sample_interval_s)
        app.state.console.start()
        try:
            yield
        finally:
            await app.state.console.close()

    app = Starlette(routes=routes(), lifespan=lifespan)
    app.state.templates = templates()
    return app


__all__ = ["create_app", "render_body"]

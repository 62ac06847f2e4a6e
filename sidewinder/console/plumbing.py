"""What every console page and action shares: the Console (one Admin, one producer, the
views), the Jinja environment, the CSRF check, and the wrappers that turn a handler's data into
a page, its JSON twin, or a redirect after a POST.

    endpoint = page("topics.html", topics)      # GET /topics and GET /api/topics
    endpoint = action(save_topic)               # POST /topics/save and /api/topics/save
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from sidewinder.client.admin import Admin
from sidewinder.client.producer import Producer
from sidewinder.client.route_cache import ClientError
from sidewinder.console.accounts import Account, Sessions
from sidewinder.console.acl import AclView
from sidewinder.console.calls import describe_error
from sidewinder.console.cluster import ClusterView, NameServerDown
from sidewinder.console.groups import GroupView
from sidewinder.console.messages import MessageView
from sidewinder.console.sampler import Sampler
from sidewinder.remoting.connection import RemotingError

HERE = Path(__file__).parent
CSRF_COOKIE = "mqconsole_csrf"
CSRF_HEADER = "x-csrf-token"
SESSION_COOKIE = "mqconsole_session"
PRODUCER_GROUP = "MQCONSOLE_PRODUCER"

Handler = Callable[[Request], Awaitable[dict[str, Any]]]


class Console:
    """What the handlers share: one Admin (signing with the console's ACL account, if
    given), one producer (for resends), the views."""

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
        self.acl = AclView(self.admin, self.cluster)
        self.sampler = Sampler(self.cluster, self.groups, sample_interval_s)
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


def account_of(request: Request) -> Account | None:
    """Who is asking: from the session cookie, or HTTP Basic credentials (a script's)."""
    sessions: Sessions | None = request.app.state.sessions
    if sessions is None:
        return None
    token = request.cookies.get(SESSION_COOKIE)
    account = sessions.account(token) if token else None
    header = request.headers.get("authorization", "")
    if account is None and header.startswith("Basic "):
        account = sessions.basic(header)
    return account


def refusal(request: Request, *, change: bool) -> Response | None:
    """What to answer instead when login is on and the request may not go on: the login page
    (a browser), 401 (the API), or 403 for a change by a read-only account. None: go on."""
    request.state.account = account = account_of(request)
    if request.app.state.sessions is None:
        return None
    if account is None:
        if is_api(request):
            return JSONResponse(
                {"error": "log in: a session cookie from /login, or HTTP Basic credentials"},
                401,
                {"WWW-Authenticate": 'Basic realm="mqconsole"'},
            )
        back = request.url.path + ("?" + request.url.query if request.url.query else "")
        return redirect("/login", next=back if request.method == "GET" else "/")
    if change and not account.may_change:
        return error_response(request, PermissionError(f"{account.name} is read-only"), 403)
    return None


def page(template: str, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A GET answering the handler's data as a page, or as JSON under /api/."""

    async def endpoint(request: Request) -> Response:
        started = time.perf_counter()
        refused = refusal(request, change=False)
        if refused is not None:
            return refused
        try:
            data = await handler(request)
        except ValueError as exc:  # what the request asked makes no sense
            return error_response(request, exc, 400)
        except LookupError as exc:  # the name server or a broker has no such thing
            return error_response(request, exc, 404)
        except (ClientError, RemotingError, OSError) as exc:
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
        account=getattr(request.state, "account", None),
        login_on=request.app.state.sessions is not None,
    )
    return with_cookie(request, HTMLResponse(html, status))


def error_response(request: Request, exc: BaseException, status: int) -> Response:
    plain = isinstance(exc, LookupError | ValueError | PermissionError | NameServerDown)
    message = str(exc) if plain else describe_error(exc)
    if is_api(request):
        return JSONResponse({"error": message}, status)
    return render(request, "error.html", {"error": message}, status)


def action(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A POST: CSRF checked; JSON under /api/, else a redirect to where the handler says."""

    async def endpoint(request: Request) -> Response:
        refused = refusal(request, change=True)
        if refused is not None:
            return refused
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
    # Only a path of this site: "//host" and "/\\host" would leave it.
    if not target.startswith("/") or target[1:2] in ("/", "\\"):
        target = "/"
    if params:
        target += ("&" if "?" in target else "?") + urlencode(params)
    return RedirectResponse(target, status_code=303)


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def param(request: Request, name: str) -> str:
    """A query parameter the page cannot do without."""
    value = request.query_params.get(name, "").strip()
    if not value:
        raise ValueError(f"the page needs ?{name}=")
    return value


def field(request: Request, name: str) -> str:
    value = str(request.state.fields.get(name, "")).strip()
    if not value:
        raise ValueError(f"the form has no {name}")
    return value

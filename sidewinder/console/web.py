"""The console's web application: server-rendered pages, each with its JSON twin under /api/.

    app = create_app("127.0.0.1:9876")
    uvicorn.run(app, host="127.0.0.1", port=8080)

GET /topics renders a page; GET /api/topics answers the same data as JSON. Every change is a
POST carrying the CSRF token (a form field, or the X-CSRF-Token header for the API) that
matches the console's cookie; pages escape everything they show (Jinja autoescape).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from sidewinder.console import handlers as h
from sidewinder.console import login
from sidewinder.console.accounts import Account, Sessions
from sidewinder.console.plumbing import HERE, Console, action, page, templates


def routes() -> list[Route | Mount]:
    pages = [
        ("/", "overview", "overview.html", h.overview),
        ("/topics", "topics", "topics.html", h.topics),
        ("/topic", "topic", "topic.html", h.topic),
        ("/groups", "groups", "groups.html", h.groups),
        ("/producers", "producers", "producers.html", h.producers),
        ("/group", "group", "group.html", h.group),
        ("/messages", "messages", "messages.html", h.messages),
        ("/message", "message", "message.html", h.message),
        ("/dlq", "dlq", "dlq.html", h.dlq),
        ("/acl", "acl", "acl.html", h.acl),
    ]
    actions = [
        ("/topics/save", h.save_topic),
        ("/topics/delete", h.delete_topic),
        ("/topic/send", h.send_message),
        ("/group/reset", h.reset_offset),
        ("/group/delete", h.delete_group),
        ("/dlq/resend", h.resend),
        ("/acl/save", h.save_account),
        ("/acl/delete", h.delete_account),
        ("/acl/white", h.update_white_list),
    ]
    table: list[Route | Mount] = []
    for path, name, template, handler in pages:
        endpoint = page(template, handler)
        table.append(Route(path, endpoint, name=name))
        table.append(Route("/api" + (path if path != "/" else "/overview"), endpoint))
    for path, handler in actions:
        table.append(Route(path, action(handler), methods=["POST"]))
        table.append(Route("/api" + path, action(handler), methods=["POST"]))
    table.append(Route("/api/dlq/export", h.export_dead_letters))
    table.append(Route("/login", login.login_page, methods=["GET"]))
    table.append(Route("/login", login.login, methods=["POST"]))
    table.append(Route("/logout", login.logout, methods=["POST"]))
    table.append(Mount("/static", StaticFiles(directory=HERE / "static"), name="static"))
    return table


def create_app(
    namesrv: str,
    *,
    access_key: str | None = None,
    secret_key: str | None = None,
    sample_interval_s: float = 10.0,
    users: dict[str, Account] | None = None,
) -> Starlette:
    """`users`: log in with these accounts (accounts.read_users); None: no login."""

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
    app.state.sessions = Sessions(users) if users else None
    return app

"""The login and logout pages, when the console runs with --users (see accounts.py)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from sidewinder.console.accounts import Sessions
from sidewinder.console.plumbing import SESSION_COOKIE, check_csrf, redirect, render


async def login_page(request: Request) -> Response:
    if request.app.state.sessions is None:
        return redirect("/")
    return render(request, "login.html", {"next": request.query_params.get("next", "/")})


async def login(request: Request) -> Response:
    sessions: Sessions | None = request.app.state.sessions
    if sessions is None:
        return redirect("/")
    try:
        fields = await check_csrf(request)
    except PermissionError as exc:
        return render(request, "login.html", {"next": "/", "error": str(exc)}, 403)
    account = sessions.login(fields.get("name", ""), fields.get("password", ""))
    if account is None:
        data = {"next": fields.get("next", "/"), "error": "wrong name or password"}
        return render(request, "login.html", data, 401)
    response = redirect(fields.get("next") or "/")
    response.set_cookie(
        SESSION_COOKIE,
        sessions.issue(account.name),
        max_age=int(sessions.lifetime_s),
        httponly=True,
        samesite="strict",
    )
    return response


async def logout(request: Request) -> Response:
    try:
        await check_csrf(request)
    except PermissionError:
        return redirect("/")
    response = redirect("/login")
    response.delete_cookie(SESSION_COOKIE)
    return response

"""The console with --users: nothing without logging in, read-only accounts look but do not
change, a script authenticates with HTTP Basic, a browser through the login form."""

from __future__ import annotations

import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interop.target import ClusterTarget
from tests.console.browsing import fill, open_page, submit, text_of
from tests.console.conftest import ApiClient, ConsoleProcess
from tests.console.logins import basic, refused_start, user_line
from tests.helpers import unique

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("console")]


@pytest.fixture(scope="module")
def guarded_console(
    target: ClusterTarget, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleProcess]:
    users = tmp_path_factory.mktemp("console-users") / "users.txt"
    lines = [user_line("alice", "admin", "alice-pw"), user_line("bob", "read-only", "bob-pw")]
    users.write_text("# accounts\n" + "\n".join(lines) + "\n")
    process = ConsoleProcess(target.namesrv_addr, "--users", str(users))
    try:
        yield process.wait_ready()
    finally:
        process.stop()


def test_nothing_without_logging_in(guarded_console: ConsoleProcess) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        ApiClient(guarded_console.url).get("/api/overview")
    assert refused.value.code == 401
    with pytest.raises(urllib.error.HTTPError) as wrong:
        ApiClient(guarded_console.url, basic("alice", "nope")).get("/api/overview")
    assert wrong.value.code == 401


def test_read_only_looks_admin_changes(
    target: ClusterTarget, guarded_console: ConsoleProcess
) -> None:
    bob = ApiClient(guarded_console.url, basic("bob", "bob-pw"))
    assert target.cluster_name in bob.get("/api/overview")["clusters"]
    fields = {"name": unique("ConsoleLogin"), "cluster": target.cluster_name, "queues": 1}
    status, answer = bob.post("/api/topics/save", fields)
    assert (status, answer) == (403, {"error": "bob is read-only"})
    alice = ApiClient(guarded_console.url, basic("alice", "alice-pw"))
    status, answer = alice.post("/api/topics/save", fields)
    assert status == 200, answer


def test_a_browser_logs_in_and_out(guarded_console: ConsoleProcess, browser: Any) -> None:
    browser.delete_all_cookies()
    open_page(browser, guarded_console.url, "/groups")
    assert browser.current_url.startswith(guarded_console.url + "/login")
    fill(browser, "#login-form", name="bob", password="wrong")
    submit(browser, "#login-form")
    assert text_of(browser, "#login-error") == "wrong name or password"
    fill(browser, "#login-form", name="bob", password="bob-pw")
    submit(browser, "#login-form")
    assert browser.current_url == guarded_console.url + "/groups"
    assert text_of(browser, "#account") == "bob (read-only)"
    submit(browser, "form.who")
    open_page(browser, guarded_console.url, "/")
    assert browser.current_url.startswith(guarded_console.url + "/login")
    browser.delete_all_cookies()


def test_a_users_file_that_is_wrong_is_named(tmp_path: Path) -> None:
    users = tmp_path / "users.txt"
    users.write_text("carol:superuser:pbkdf2_sha256$1$AA==$AA==\n")
    assert f"{users}:1: expected name:role:hash" in refused_start("--users", str(users))


def test_a_keys_file_without_both_keys_is_named(tmp_path: Path) -> None:
    keys = tmp_path / "keys.yml"
    keys.write_text("accessKey: onlyKey1\n")
    said = refused_start("--acl-file", str(keys))
    assert f"mqconsole: {keys}: accessKey and secretKey go together" in said

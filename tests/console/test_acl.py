"""The ACL page on both targets (RocketMQ 4.9.7 and ours) with aclEnable=true, the console
signing with an admin account: the accounts without their secrets, an account created, changed
(its secret kept) and deleted through the API and through the page's forms, the global white
list replaced, read-only users refused; and the page in front of a broker without ACL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from interop.target import ClusterTarget
from sidewinder.client.admin import Admin
from sidewinder.client.admin_acl import BrokerAclConfig, broker_acl_config
from tests.console.browsing import fill, has, open_page, submit, submit_form, text_of
from tests.console.conftest import ApiClient, ConsoleProcess
from tests.console.logins import basic, user_line
from tests.helpers import unique
from tests.interop.acl_targets import acl_cluster

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("console")]

ADMIN, ADMIN_SECRET = "ConsoleAdmin1", "ConsoleSecret1"
USER, USER_SECRET = "RocketMQ", "UserSecret12"
WHITE = "10.10.103.*"
PLAIN_ACL = {
    "globalWhiteRemoteAddresses": [WHITE],
    "accounts": [
        {
            "accessKey": USER,
            "secretKey": USER_SECRET,
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "SUB",
            "topicPerms": ["AclOpen=PUB|SUB", "AclClosed=DENY"],
            "groupPerms": ["aclGroup=SUB"],
        },
        {"accessKey": ADMIN, "secretKey": ADMIN_SECRET, "admin": True},
    ],
}


@pytest.fixture(scope="module")
def acl_target(
    target_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterTarget]:
    workdir = tmp_path_factory.mktemp(f"{target_kind}-console-acl")
    yield from acl_cluster(target_kind, workdir, {"conf/plain_acl.yml": PLAIN_ACL})


def _console(acl_target: ClusterTarget, *options: str) -> Iterator[ConsoleProcess]:
    # The keys from a file, as an operator keeps the secret out of the process list.
    keys = acl_target.workdir / "console-keys.yml"
    keys.write_text(f"accessKey: {ADMIN}\nsecretKey: {ADMIN_SECRET}\n")
    process = ConsoleProcess(acl_target.namesrv_addr, "--acl-file", str(keys), *options)
    try:
        yield process.wait_ready()
    finally:
        process.stop()


@pytest.fixture(scope="module")
def acl_console(acl_target: ClusterTarget) -> Iterator[ConsoleProcess]:
    yield from _console(acl_target)


@pytest.fixture(scope="module")
def acl_api(acl_console: ConsoleProcess) -> ApiClient:
    return ApiClient(acl_console.url)


def _broker(api: ApiClient) -> dict[str, Any]:
    brokers = api.get("/api/acl")["brokers"]
    assert len(brokers) == 1, brokers
    return dict(brokers[0])


def _accounts(api: ApiClient) -> dict[str, dict[str, Any]]:
    return {a["access_key"]: a for a in _broker(api)["accounts"]}


def _held(target: ClusterTarget) -> BrokerAclConfig:
    """What the broker holds, secrets included, asked directly (not through the console)."""

    async def ask() -> BrokerAclConfig:
        async with Admin(target.namesrv_addr, access_key=ADMIN, secret_key=ADMIN_SECRET) as admin:
            return await broker_acl_config(admin, target.broker_addr)

    return asyncio.run(ask())


def test_accounts_without_their_secrets(acl_target: ClusterTarget, acl_api: ApiClient) -> None:
    broker = _broker(acl_api)
    assert (broker["addr"], broker["acl_enabled"], broker["error"]) == (
        acl_target.broker_addr,
        True,
        None,
    )
    assert broker["global_white_addrs"] == [WHITE]
    accounts = _accounts(acl_api)
    assert accounts[USER] == {
        "access_key": USER,
        "secret_key": "********",
        "white_remote_address": "",
        "admin": False,
        "default_topic_perm": "DENY",
        "default_group_perm": "SUB",
        "topic_perms": ["AclOpen=PUB|SUB", "AclClosed=DENY"],
        "group_perms": ["aclGroup=SUB"],
    }
    assert accounts[ADMIN]["admin"] is True
    with acl_api.opener.open(acl_api.base + "/acl") as page:
        html = page.read().decode()
    with acl_api.opener.open(acl_api.base + "/api/acl") as answer:
        raw = answer.read().decode()
    for secret in (USER_SECRET, ADMIN_SECRET):
        assert secret not in html and secret not in raw


def test_create_change_and_delete_an_account(acl_target: ClusterTarget, acl_api: ApiClient) -> None:
    key = unique("ConsoleApp")
    status, answer = acl_api.post("/api/acl/save", {"access_key": key})
    assert status == 400 and "give a secret key" in answer["error"], answer
    fields = {"access_key": key, "secret_key": "AppSecret12", "topic_perms": "T1=PUB, T2=SUB"}
    status, answer = acl_api.post("/api/acl/save", {**fields, "default_topic_perm": "DENY"})
    assert (status, answer["brokers"]) == (200, [acl_target.broker_addr]), answer
    assert _accounts(acl_api)[key]["topic_perms"] == ["T1=PUB", "T2=SUB"]

    # A blank secret keeps the broker's; settings not given keep theirs.
    change = {"access_key": key, "admin": "true", "broker": acl_target.broker_addr}
    status, answer = acl_api.post("/api/acl/save", change)
    assert status == 200, answer
    shown = _accounts(acl_api)[key]
    assert (shown["admin"], shown["default_topic_perm"]) == (True, "DENY")
    assert shown["topic_perms"] == ["T1=PUB", "T2=SUB"]
    held = _held(acl_target).account(key)
    assert held is not None and held.secret_key == "AppSecret12"

    status, answer = acl_api.post("/api/acl/delete", {"access_key": key})
    assert (status, answer["brokers"]) == (200, [acl_target.broker_addr]), answer
    assert key not in _accounts(acl_api)
    status, answer = acl_api.post("/api/acl/delete", {"access_key": key})
    assert status == 400 and f"no broker holds an account {key}" in answer["error"]


def test_replace_the_global_white_list(acl_target: ClusterTarget, acl_api: ApiClient) -> None:
    status, answer = acl_api.post("/api/acl/white", {"addresses": f"{WHITE}\n192.168.9.*"})
    assert status == 200, answer
    assert _broker(acl_api)["global_white_addrs"] == [WHITE, "192.168.9.*"]
    status, answer = acl_api.post("/api/acl/white", {"addresses": WHITE})
    assert status == 200, answer
    assert _held(acl_target).global_white_addrs == (WHITE,)


def test_refusals(acl_target: ClusterTarget, acl_api: ApiClient) -> None:
    status, answer = acl_api.post("/api/acl/delete", {"access_key": USER}, token="")
    assert status == 403 and "CSRF" in answer["error"]
    status, answer = acl_api.post("/api/acl/delete", {"access_key": USER, "broker": "1.2.3.4:1"})
    assert status == 400 and "no broker 1.2.3.4:1 is registered" in answer["error"]
    status, answer = acl_api.post("/api/acl/save", {"access_key": USER, "admin": "maybe"})
    assert status == 400 and "admin 'maybe'" in answer["error"]
    assert USER in _accounts(acl_api)


@pytest.fixture(scope="module")
def guarded_acl_console(
    acl_target: ClusterTarget, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleProcess]:
    users = tmp_path_factory.mktemp("console-acl-users") / "users.txt"
    users.write_text(user_line("bob", "read-only", "bob-pw") + "\n")
    yield from _console(acl_target, "--users", str(users))


def test_a_read_only_user_looks_and_changes_nothing(guarded_acl_console: ConsoleProcess) -> None:
    bob = ApiClient(guarded_acl_console.url, basic("bob", "bob-pw"))
    assert USER in {a["access_key"] for a in bob.get("/api/acl")["brokers"][0]["accounts"]}
    for path, fields in [
        ("/api/acl/save", {"access_key": unique("ConsoleRo"), "secret_key": "Secret123"}),
        ("/api/acl/delete", {"access_key": USER}),
        ("/api/acl/white", {"addresses": "*"}),
    ]:
        assert bob.post(path, fields) == (403, {"error": "bob is read-only"})


def test_a_broker_without_acl(api: ApiClient) -> None:
    """The shared target runs without ACL: the page says so, and a change has no broker."""
    broker = api.get("/api/acl")["brokers"][0]
    assert (broker["acl_enabled"], broker["error"], broker["accounts"]) == (False, None, [])
    status, answer = api.post("/api/acl/save", {"access_key": "Nobody12", "secret_key": "x" * 8})
    assert status == 400 and "no broker has ACL on" in answer["error"]


def test_the_page_in_a_browser(
    acl_target: ClusterTarget, acl_console: ConsoleProcess, browser: Any
) -> None:
    """See the accounts, create one through the form, see it, delete it."""
    key = unique("ConsoleUi")
    open_page(browser, acl_console.url, "/acl")
    card = f'section[data-broker="{acl_target.broker_addr}"]'
    assert "ACL on" in text_of(browser, card + " h2")
    assert text_of(browser, f'{card} tr[data-account="{USER}"] .secret') == "********"
    assert "AclOpen=PUB|SUB" in text_of(browser, f'{card} tr[data-account="{USER}"]')
    assert USER_SECRET not in browser.page_source

    fill(
        browser,
        "#account-form",
        access_key=key,
        secret_key="UiSecret123",
        topic_perms="Orders=PUB|SUB,Audit=SUB",
        default_group_perm="SUB",
    )
    submit(browser, "#account-form")
    assert f"account {key} saved on {acl_target.broker_addr}" in text_of(browser, "#notice")
    row = f'{card} tr[data-account="{key}"]'
    assert "Orders=PUB|SUB" in text_of(browser, row)
    assert "UiSecret123" not in browser.page_source

    submit_form(browser, browser.find_element(By.CSS_SELECTOR, f"{row} form.delete-account"))
    assert f"account {key} deleted on {acl_target.broker_addr}" in text_of(browser, "#notice")
    assert not has(browser, row)
    assert has(browser, f'{card} tr[data-account="{USER}"]')


def test_the_page_without_acl(target: ClusterTarget, console: ConsoleProcess, browser: Any) -> None:
    open_page(browser, console.url, "/acl")
    card = f'section[data-broker="{target.broker_addr}"]'
    assert "ACL is off on this broker" in text_of(browser, card)
    assert not has(browser, "#account-form")
    assert "active" in (browser.find_element(By.LINK_TEXT, "ACL").get_attribute("class") or "")

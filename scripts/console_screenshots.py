"""Screenshots of the console's main pages for docs/console/, from a local Sidewinder with a
little realistic traffic: topics, a group behind, a group consuming, a dead letter; the ACL page
from a second one with aclEnable=true and a few accounts, the console signing as its admin.

    python scripts/console_screenshots.py [--out docs/console] [--only acl]

Needs the console extra, selenium, and Debian's chromium with chromium-driver (as the browser
tests do).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

sys.path.insert(0, str(Path(__file__).parent))
from bench_console import local_dev, wait_http

from interop.ports import lease_port_block
from interop.target import create_target
from sidewinder.client.producer import Message
from sidewinder.client.push_consumer import ConsumeStatus
from sidewinder.client.sync import Admin, Producer, PushConsumer

PAGES = {
    "overview": "/",
    "topics": "/topics?kind=normal",
    "topic": "/topic?name=Orders",
    "groups": "/groups",
    "group": "/group?name=billing",
    "messages": "/messages?topic=Orders",
    "dlq": "/dlq?group=shipping",
}
ACL_ADMIN, ACL_ADMIN_SECRET = "OpsAdmin01", "ops-admin-secret"
PLAIN_ACL = {
    "globalWhiteRemoteAddresses": ["10.10.103.*", "192.168.0.*"],
    "accounts": [
        {"accessKey": ACL_ADMIN, "secretKey": ACL_ADMIN_SECRET, "admin": True},
        {
            "accessKey": "shop-orders",
            "secretKey": "orders-secret-1",
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "SUB",
            "topicPerms": ["Orders=PUB|SUB", "Payments=SUB"],
            "groupPerms": ["billing=SUB", "shipping=SUB"],
        },
        {
            "accessKey": "audit-reader",
            "secretKey": "audit-secret-1",
            "whiteRemoteAddress": "10.20.*.*",
            "defaultTopicPerm": "SUB",
            "defaultGroupPerm": "SUB",
        },
    ],
}


def traffic(namesrv: str) -> PushConsumer:
    """Orders and payments sent; billing reset to the start (behind); shipping consuming, with
    one order it refuses for good (a dead letter). The consumer is left running."""
    with Admin(namesrv) as admin:
        for topic in ("Orders", "Payments", "Shipments", "Refunds"):
            admin.create_topic(topic, queues=4)
    with Producer("shop-producers", namesrv) as producer:
        for n in range(120):
            order = {"order": n, "amount": round(n * 3.25, 2), "items": ["book", "pen"]}
            keys = [f"order-{n}"]
            producer.send(Message("Orders", json.dumps(order).encode(), tags="paid", keys=keys))
        for n in range(40):
            producer.send(Message("Payments", f"payment {n} settled".encode(), keys=[f"pay-{n}"]))
        producer.send(Message("Shipments", bytes(range(64)), tags="label"))

    def refuse_order_13(messages: list[Any]) -> ConsumeStatus:
        if any(b'"order": 13,' in m.body for m in messages):
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.SUCCESS

    shipping = PushConsumer(
        "shipping", namesrv, listener=refuse_order_13, max_reconsume_times=0, consume_from="first"
    )
    shipping.subscribe("Orders", "*")
    shipping.start()
    with Admin(namesrv) as admin:
        admin.update_group("billing")
        admin.update_group("audit")
    return shipping


@contextmanager
def acl_console(workdir: Path) -> Iterator[str]:
    """A Sidewinder cluster with aclEnable=true and PLAIN_ACL, and a console signing with its
    admin account: the console's URL."""
    home = workdir / "rocketmq-home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(PLAIN_ACL, sort_keys=False))
    conf = {"aclEnable": "true", "rocketmqHome": str(home)}
    target = create_target("sidewinder", workdir / "cluster", conf).start()
    port = lease_port_block()
    command = [sys.executable, "-m", "sidewinder.console", "-n", target.namesrv_addr]
    keys = ["--access-key", ACL_ADMIN, "--secret-key", ACL_ADMIN_SECRET]
    console = subprocess.Popen([*command, *keys, "--port", str(port)])
    try:
        wait_http(f"http://127.0.0.1:{port}/static/console.css")
        yield f"http://127.0.0.1:{port}"
    finally:
        console.terminate()
        console.wait(10)
        target.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs/console"))
    parser.add_argument("--only", choices=["acl"], help="only this page's screenshot")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1440,900"):
        options.add_argument(flag)
    with tempfile.TemporaryDirectory() as tmp, acl_console(Path(tmp)) as base:
        browser = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            browser.get(base + "/acl")
            browser.save_screenshot(str(args.out / "acl.png"))
        finally:
            browser.quit()
    if args.only == "acl":
        print(f"screenshot in {args.out}")
        return 0
    with tempfile.TemporaryDirectory() as tmp, local_dev(Path(tmp)) as (namesrv, _, base):
        shipping = traffic(namesrv)
        browser = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            _reset_billing(browser, base)
            time.sleep(25)  # the dead letter, a few TPS samples for the chart
            for name, path in PAGES.items():
                browser.get(base + path)
                browser.save_screenshot(str(args.out / f"{name}.png"))
            browser.get(base + "/messages?topic=Orders&key=order-7")
            browser.find_element("css selector", "#message-list a").click()
            browser.save_screenshot(str(args.out / "message.png"))
        finally:
            browser.quit()
            shipping.close()
    print(f"screenshots in {args.out}")
    return 0


def _reset_billing(browser: Any, base: str) -> None:
    """billing at the start of Orders, through the console's own form: 120 messages behind."""
    browser.get(base + "/group?name=billing")
    form = browser.find_element("css selector", "#reset-form")
    topic = form.find_element("name", "topic")
    topic.clear()
    topic.send_keys("Orders")
    form.find_element("css selector", "button[type=submit]").click()
    browser.switch_to.alert.accept()
    time.sleep(1)


if __name__ == "__main__":
    raise SystemExit(main())

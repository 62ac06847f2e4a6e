"""The console in a real headless Chromium, as an operator uses it, against both targets (our
cluster and RocketMQ 4.9.7): the same pages show the same facts.

Messages are sent and consumed with our Python client; the console only reads and changes what
a broker holds, over remoting.
"""

from __future__ import annotations

from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from interop.target import ClusterTarget
from sidewinder.client.producer import Message
from sidewinder.client.push_consumer import ConsumeStatus
from sidewinder.client.sync import Producer, PushConsumer
from tests.console.browsing import fill, has, open_page, submit, submit_form, text_of
from tests.console.conftest import ConsoleProcess, wait_for
from tests.helpers import unique

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("console")]

COUNT = 20


def test_overview_shows_the_broker(
    target: ClusterTarget, console: ConsoleProcess, browser: Any
) -> None:
    open_page(browser, console.url, "/")
    table = text_of(browser, "#brokers")
    assert target.broker_addr in table
    assert "MASTER" in table
    assert "alive" in table
    assert target.cluster_name in text_of(browser, "main")


def _create_topic(browser: Any, console: ConsoleProcess, topic: str) -> None:
    open_page(browser, console.url, "/topics")
    fill(browser, "#topic-form", name=topic, queues="4")
    submit(browser, "#topic-form")
    assert f"topic {topic} saved" in text_of(browser, "#notice")
    assert text_of(browser, "#topic-name") == topic
    assert len(browser.find_elements("css selector", "#queues tbody tr")) == 4


def _group_lag(browser: Any, console: ConsoleProcess, group: str) -> int:
    open_page(browser, console.url, "/group", name=group)
    return int(text_of(browser, "#group-lag"))


def test_topic_lag_reset_and_key(
    target: ClusterTarget, console: ConsoleProcess, browser: Any
) -> None:
    """Create a topic through the form, send to it, reset a group to the earliest offset (its
    lag appears), let a consumer run (its lag falls to 0), find a message by key."""
    topic, group = unique("ConsoleOrders"), unique("console_billing")
    _create_topic(browser, console, topic)
    with Producer(unique("console_producers"), target.namesrv_addr) as producer:
        for n in range(COUNT):
            producer.send(Message(topic, f"order {n}".encode(), tags="paid", keys=[f"order-{n}"]))

    open_page(browser, console.url, "/group", name=group)
    fill(browser, "#reset-form", topic=topic)
    submit(browser, "#reset-form")
    assert f"{group} reset on {topic}" in text_of(browser, "#notice")
    assert int(text_of(browser, "#group-lag")) == COUNT

    got: list[Any] = []
    consumer = PushConsumer(
        group, target.namesrv_addr, listener=_collect(got), persist_interval_s=1
    )
    consumer.subscribe(topic, "*")
    consumer.start()
    try:
        wait_for(lambda: len(got) >= COUNT, 60, "the consumer to read the messages")
        wait_for(lambda: _group_lag(browser, console, group) == 0, 30, "the lag to fall to 0")
        assert int(text_of(browser, "#group-clients")) == 1
        assert "PYTHON" in text_of(browser, "#connections") or "JAVA" in text_of(
            browser, "#connections"
        )
        open_page(browser, console.url, "/groups", sort="lag", order="desc")
        row = browser.find_element("css selector", f'#groups tr[data-group="{group}"]')
        assert row.find_element("css selector", ".lag").text == "0"

        # The message page says the group consumed it, and hands it to the consumer again.
        open_page(browser, console.url, "/messages", topic=topic, key="order-7")
        browser.find_element(By.CSS_SELECTOR, "#message-list a").click()
        assert f"{group} CONSUMED" in text_of(browser, "#message-tracks")
        submit(browser, "#message-tracks form")
        assert "CR_SUCCESS" in text_of(browser, "#notice")
        wait_for(lambda: len(got) == COUNT + 1, 10, "the message consumed again")
    finally:
        consumer.close()

    open_page(browser, console.url, "/messages")
    fill(browser, "#search-key", topic=topic, key="order-7")
    submit(browser, "#search-key")
    assert text_of(browser, "#found-count") == "1"
    assert "order-7" in text_of(browser, "#message-list")


def _collect(got: list[Any]) -> Any:
    def listener(messages: list[Any]) -> ConsumeStatus:
        got.extend(messages)
        return ConsumeStatus.SUCCESS

    return listener


def test_dead_letter_resend(target: ClusterTarget, console: ConsoleProcess, browser: Any) -> None:
    """A message the group's consumer refuses goes to %DLQ%group (no retries allowed); the DLQ
    page shows it; Resend hands it to the connected consumer (CONSUME_MESSAGE_DIRECTLY), then
    sends it again to its topic, where the consumer takes it once more."""
    topic, group = unique("ConsoleDlq"), unique("console_dlq")
    poison = b"poison pill"
    seen: list[bytes] = []

    def listener(messages: list[Any]) -> ConsumeStatus:
        seen.extend(m.body for m in messages)
        refuse = any(m.body == poison for m in messages) and seen.count(poison) == 1
        return ConsumeStatus.RECONSUME_LATER if refuse else ConsumeStatus.SUCCESS

    with Producer(unique("console_producers"), target.namesrv_addr) as producer:
        producer.send(Message(topic, b"warm-up"))
        consumer = PushConsumer(
            group,
            target.namesrv_addr,
            listener=listener,
            max_reconsume_times=0,
            consume_from="first",
        )
        consumer.subscribe(topic, "*")
        consumer.start()
        try:
            wait_for(lambda: b"warm-up" in seen, 60, "the consumer to start")
            producer.send(Message(topic, poison, tags="bad", keys=["poison"]))
            wait_for(lambda: _dlq_count(browser, console, group) >= 1, 60, "a dead letter")
            assert "poison" in text_of(browser, "#message-list")

            form = browser.find_element(By.CSS_SELECTOR, "form.resend")
            Select(form.find_element(By.NAME, "client_id")).select_by_index(1)
            submit_form(browser, form)
            assert "CR_SUCCESS" in text_of(browser, "#notice")
            assert seen.count(poison) == 2

            submit(browser, "form.resend")
            assert f"sent again to {topic}" in text_of(browser, "#notice")
            wait_for(lambda: seen.count(poison) == 3, 60, "the resent message")
            export = browser.find_element(By.LINK_TEXT, "Export as JSON lines")
            assert export.get_attribute("href").endswith(f"/api/dlq/export?group={group}")
        finally:
            consumer.close()
    assert _found_by_key(browser, console, topic, "poison") == 2


def _found_by_key(browser: Any, console: ConsoleProcess, topic: str, key: str) -> int:
    open_page(browser, console.url, "/messages", topic=topic, key=key)
    return int(text_of(browser, "#found-count"))


def _dlq_count(browser: Any, console: ConsoleProcess, group: str) -> int:
    open_page(browser, console.url, "/dlq", group=group)
    return int(text_of(browser, "#dlq-count"))


def test_markup_in_a_message_is_shown_as_text(
    target: ClusterTarget, console: ConsoleProcess, browser: Any
) -> None:
    topic = unique("ConsoleXss")
    script = "<script>document.title='owned'</script>"
    with Producer(unique("console_producers"), target.namesrv_addr) as producer:
        sent = producer.send(
            Message(topic, script.encode(), keys=["x<b>1"], properties={"note": script})
        )
    open_page(browser, console.url, "/message", id=sent.offset_msg_id)
    assert text_of(browser, "#message-body") == script
    assert script in text_of(browser, "#message-properties")
    assert browser.title != "owned"
    assert not has(browser, "#message-body script")
    assert "&lt;script&gt;" in browser.page_source

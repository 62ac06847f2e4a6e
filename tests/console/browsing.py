"""What the browser tests do on a page: open it, fill a form, read an element's text."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from selenium.common.exceptions import NoSuchElementException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait


def open_page(browser: Any, base: str, path: str, **params: str) -> None:
    browser.get(base + path + ("?" + urlencode(params) if params else ""))


def text_of(browser: Any, css: str) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, css).text)


def has(browser: Any, css: str) -> bool:
    try:
        browser.find_element(By.CSS_SELECTOR, css)
    except NoSuchElementException:
        return False
    return True


def fill(browser: Any, form_css: str, **values: str) -> None:
    form = browser.find_element(By.CSS_SELECTOR, form_css)
    for name, value in values.items():
        element = form.find_element(By.NAME, name)
        if element.tag_name == "select":
            Select(element).select_by_value(value)
        else:
            element.clear()
            element.send_keys(value)


def submit(browser: Any, form_css: str) -> None:
    submit_form(browser, browser.find_element(By.CSS_SELECTOR, form_css))


def submit_form(browser: Any, form: Any) -> None:
    """Click the form's button, accept its confirmation if it asks one, and wait for the next
    page: the old one carried a mark the new one lacks (checked through the navigation, when
    the driver may answer with errors about the departing document)."""
    confirm = form.get_attribute("data-confirm")
    browser.execute_script("window.mqconsoleLeaving = true")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    if confirm:
        WebDriverWait(browser, 5).until(expected_conditions.alert_is_present()).accept()
    WebDriverWait(browser, 30, ignored_exceptions=(WebDriverException,)).until(
        lambda b: b.execute_script(
            "return window.mqconsoleLeaving === undefined && document.readyState === 'complete'"
        )
    )

"""Fixtures of the console's tests: a running mqconsole in front of each cluster target, a JSON
client of its API, and one headless Chromium (Selenium with Debian's chromium-driver) per worker.

The browser tests share one xdist group, so one worker starts the browser and the consoles.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.cookiejar import CookieJar
from typing import Any

import pytest

from interop.ports import lease_port_block
from interop.target import ClusterTarget

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


class ConsoleProcess:
    """An mqconsole process for one name server, on a leased port."""

    def __init__(self, namesrv: str, *options: str) -> None:
        self.port = lease_port_block()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "sidewinder.console", "-n", namesrv]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port), *options],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout_s: float = 20) -> ConsoleProcess:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                output = self.process.stdout.read().decode() if self.process.stdout else ""
                raise RuntimeError(f"mqconsole exited {self.process.returncode}: {output}")
            try:
                with urllib.request.urlopen(self.url + "/static/console.css", timeout=2):
                    return self
            except OSError:
                time.sleep(0.2)
        raise TimeoutError(f"mqconsole on {self.url} did not answer in {timeout_s} s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class ApiClient:
    """The console's JSON API with its CSRF cookie, as a script would use it."""

    def __init__(self, base: str, headers: dict[str, str] | None = None) -> None:
        self.base = base
        self.headers = headers or {}
        self.cookies = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))

    def token(self) -> str:
        if not any(c.name == "mqconsole_csrf" for c in self.cookies):
            self.get("/api/overview")
        return next(c.value or "" for c in self.cookies if c.name == "mqconsole_csrf")

    def get(self, path: str) -> Any:
        request = urllib.request.Request(self.base + path, headers=self.headers)
        with self.opener.open(request, timeout=30) as reply:
            return json.loads(reply.read())

    def post(self, path: str, fields: dict[str, Any], *, token: str | None = None) -> Any:
        """(status, JSON answer) of a POST; the CSRF header unless `token` says otherwise."""
        sent = self.token() if token is None else token
        request = urllib.request.Request(
            self.base + path,
            json.dumps(fields).encode(),
            {"Content-Type": "application/json", "X-CSRF-Token": sent, **self.headers},
        )
        try:
            with self.opener.open(request, timeout=60) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())


def wait_for(check: Any, timeout_s: float, what: str, interval_s: float = 0.5) -> Any:
    """Poll `check` until it returns something true; its value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


@pytest.fixture(scope="session")
def console(target: ClusterTarget) -> Iterator[ConsoleProcess]:
    process = ConsoleProcess(target.namesrv_addr)
    try:
        yield process.wait_ready()
    finally:
        process.stop()


@pytest.fixture(scope="session")
def api(console: ConsoleProcess) -> ApiClient:
    return ApiClient(console.url)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the worker's browser tests."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1440,1000")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()

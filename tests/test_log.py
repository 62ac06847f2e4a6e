"""configure_logging: level and format from arguments or the environment, bad values named."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
import structlog

from sidewinder.common.log import configure_logging, library_logger


@pytest.fixture(autouse=True)
def _restore_structlog() -> object:
    yield
    structlog.reset_defaults()


def test_json_lines_at_the_chosen_level() -> None:
    out = io.StringIO()
    configure_logging("WARNING", fmt="json", stream=out)
    log = structlog.get_logger("t")
    log.info("quiet")
    log.warning("loud", n=3)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e["event"], e["level"], e["n"]) for e in lines] == [("loud", "warning", 3)]


def test_environment_and_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setenv("SIDEWINDER_LOG_LEVEL", "debug")
    configure_logging(stream=out)
    structlog.get_logger("t").debug("seen")
    assert "seen" in out.getvalue()
    with pytest.raises(ValueError, match="'LOUD'"):
        configure_logging("loud")
    with pytest.raises(ValueError, match="'xml'"):
        configure_logging(fmt="xml")


def run_program(program: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )


def test_the_client_configures_nothing_and_keeps_its_logs_off_the_programs_stdout() -> None:
    """A program using the client prints its own lines on stdout; the client's log lines go to
    stderr (structlog's defaults would print them to stdout, into the program's output), and
    importing the client leaves structlog unconfigured."""
    done = run_program(
        "import structlog\n"
        "from sidewinder.client import admin, membership, producer, push_consumer\n"
        "print('mine', structlog.is_configured())\n"
        "membership.log.bind(group='g').info('client.rebalanced', added=1)\n"
    )
    assert done.stdout == "mine False\n"
    assert "client.rebalanced" in done.stderr
    assert "group=g" in done.stderr


def test_a_program_that_configures_structlog_keeps_its_configuration() -> None:
    """Before importing the client or after: the client's lines go the program's way."""
    done = run_program(
        "import sys, structlog\n"
        "from sidewinder.client import membership\n"
        "structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stdout))\n"
        "import sidewinder.client.push_consumer\n"
        "structlog.get_logger().info('theirs')\n"
        "membership.log.info('client.rebalanced', added=1)\n"
    )
    assert "theirs" in done.stdout
    assert "client.rebalanced" in done.stdout
    assert done.stderr == ""


def test_library_loggers_follow_the_level_until_structlog_is_configured(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    structlog.reset_defaults()
    monkeypatch.setenv("SIDEWINDER_LOG_LEVEL", "WARNING")
    log = library_logger("sidewinder.client.t").bind(group="g")
    log.info("hidden")
    log.warning("shown", n=1)
    out = io.StringIO()
    configure_logging("INFO", fmt="json", stream=out)
    log.info("configured")
    captured = capsys.readouterr()
    assert "hidden" not in captured.err and "shown" in captured.err and captured.out == ""
    assert [json.loads(line)["event"] for line in out.getvalue().splitlines()] == ["configured"]
    assert json.loads(out.getvalue())["group"] == "g"

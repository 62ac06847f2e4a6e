"""configure_logging: level and format from arguments or the environment, bad values named."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
import structlog

from sidewinder.common.log import configure_logging


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


def test_the_client_keeps_its_logs_off_the_programs_stdout() -> None:
    """A program using the client prints its own lines on stdout; the client's log lines go to
    stderr (structlog alone would print them to stdout, into the program's output)."""
    program = (
        "import structlog, sidewinder.client\n"
        "print('mine')\n"
        "structlog.get_logger('sidewinder.client.x').info('client.rebalanced', added=1)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "mine\n"
    assert "client.rebalanced" in done.stderr


def test_a_program_that_configures_structlog_keeps_its_configuration() -> None:
    program = (
        "import sys, structlog\n"
        "structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stdout))\n"
        "import sidewinder.client\n"
        "structlog.get_logger().info('theirs')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert "theirs" in done.stdout

"""configure_logging: level and format from arguments or the environment, bad values named."""

from __future__ import annotations

import io
import json

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

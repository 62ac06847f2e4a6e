"""Logging for our entry points: structlog to stderr, leaving stdout to command output.

configure_logging()          # level from $SIDEWINDER_LOG_LEVEL (INFO), format from
                             # $SIDEWINDER_LOG_FORMAT: "console" (default) or "json"
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

import structlog


def configure_logging(
    level: str | None = None, *, fmt: str | None = None, stream: TextIO | None = None
) -> None:
    level_name = (level or os.environ.get("SIDEWINDER_LOG_LEVEL", "INFO")).upper()
    numeric = logging.getLevelName(level_name)
    if not isinstance(numeric, int):
        raise ValueError(f"log level {level_name!r} is not one of DEBUG, INFO, WARNING, ERROR")
    fmt = fmt or os.environ.get("SIDEWINDER_LOG_FORMAT", "console")
    if fmt not in ("console", "json"):
        raise ValueError(f"log format {fmt!r} is not console or json")
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=False),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(stream or sys.stderr),
        cache_logger_on_first_use=False,
    )


def configure_library_logging() -> None:
    """For code that runs inside someone else's program (the client): unless the program has
    configured structlog itself, log to stderr at $SIDEWINDER_LOG_LEVEL (INFO), so that the
    program's own stdout stays its own (structlog's default prints to stdout)."""
    if structlog.is_configured():
        return
    try:
        configure_logging(stream=sys.stderr)
    except ValueError:
        configure_logging("INFO", fmt="console", stream=sys.stderr)

"""Logging: our entry points configure structlog; library code only asks for loggers.

configure_logging()          # an entry point's main(): level from $SIDEWINDER_LOG_LEVEL (INFO),
                             # format from $SIDEWINDER_LOG_FORMAT: "console" (default) or "json"
configure_logging(daemon=True)  # a server's: its output may fail (a full disk), it runs on
log = library_logger(__name__)   # a module that may run inside someone else's program
log.warning("client.pull_failed", queue=str(queue), error=str(exc))

Log lines go to stderr, leaving stdout to command output and to the host program.
"""

from __future__ import annotations

import io
import logging
import os
import sys
from typing import Any, TextIO

import structlog


def configure_logging(
    level: str | None = None,
    *,
    fmt: str | None = None,
    stream: TextIO | None = None,
    daemon: bool = False,
) -> None:
    """`daemon`: stdout and stderr become `Unfailing` first, so a log line, a print or a
    traceback that cannot be written (ENOSPC when the logs share the store's full disk, a
    closed pipe) never stops the server; logback's appenders do not stop RocketMQ either."""
    if daemon:
        sys.stdout = Unfailing.around(sys.stdout)
        sys.stderr = Unfailing.around(sys.stderr)
    numeric, fmt = _level_and_format(level, fmt)
    structlog.configure(
        processors=_processors(fmt),
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(stream or sys.stderr),
        cache_logger_on_first_use=False,
    )


class Unfailing(io.TextIOBase):
    """A text stream whose write errors are dropped and counted, not raised. Output that could
    not be written stays buffered (up to the stream's buffer) and goes out once it can."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self.dropped = 0  # writes and flushes that failed

    @classmethod
    def around(cls, stream: TextIO) -> TextIO:
        return stream if isinstance(stream, Unfailing) else cls(stream)  # type: ignore[return-value]

    def write(self, text: str) -> int:
        try:
            return self.inner.write(text)
        except OSError:
            self.dropped += 1
            return len(text)

    def flush(self) -> None:
        try:
            self.inner.flush()
        except OSError:
            self.dropped += 1

    def fileno(self) -> int:
        return self.inner.fileno()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def writable(self) -> bool:
        return True


def _level_and_format(level: str | None, fmt: str | None) -> tuple[int, str]:
    level_name = (level or os.environ.get("SIDEWINDER_LOG_LEVEL", "INFO")).upper()
    numeric = logging.getLevelName(level_name)
    if not isinstance(numeric, int):
        raise ValueError(f"log level {level_name!r} is not one of DEBUG, INFO, WARNING, ERROR")
    fmt = fmt or os.environ.get("SIDEWINDER_LOG_FORMAT", "console")
    if fmt not in ("console", "json"):
        raise ValueError(f"log format {fmt!r} is not console or json")
    return numeric, fmt


def _processors(fmt: str) -> list[structlog.typing.Processor]:
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    return [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=False),
        renderer,
    ]


class LibraryLogger:
    """A logger for code that runs inside someone else's program (the client, and the remoting
    modules it uses). It configures nothing. Once structlog is configured (by the program, or by
    one of our entry points), each call goes through structlog.get_logger(name), as any module's
    would; until then, lines go to stderr at $SIDEWINDER_LOG_LEVEL (INFO), because structlog's
    defaults would print them on the program's stdout."""

    def __init__(self, name: str, context: dict[str, Any] | None = None) -> None:
        self._name = name
        self._context = context or {}

    def bind(self, **values: Any) -> LibraryLogger:
        return LibraryLogger(self._name, {**self._context, **values})

    def __getattr__(self, method: str) -> Any:
        """debug, info, warning, error, exception...: of the logger that applies now."""
        logger = structlog.get_logger(self._name) if structlog.is_configured() else _stderr()
        return getattr(logger.bind(**self._context), method)


def library_logger(name: str) -> LibraryLogger:
    return LibraryLogger(name)


def _stderr() -> Any:
    """structlog's default logger, on stderr and at our level, without configuring structlog."""
    try:
        numeric, fmt = _level_and_format(None, None)
    except ValueError:  # a bad variable must not break the program using the library
        numeric, fmt = logging.INFO, "console"
    return structlog.wrap_logger(
        structlog.PrintLogger(sys.stderr),
        processors=_processors(fmt),
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
    )

"""What a sub-command of our mqadmin is: its handler, one line of help and its own options.

    @command("a topic's route as JSON", ("-t", {"dest": "topic", "required": True}))
    async def topic_route(args: argparse.Namespace) -> int: ...

`command` only wraps the handler; nothing is registered. The sub-command's name is given once,
in the command table of `sidewinder.tools.mqadmin`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

Handler = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]
Option = tuple[str, dict[str, Any]]  # a flag and the keyword arguments of add_argument


@dataclass(frozen=True)
class Command:
    help_text: str
    run: Handler
    options: tuple[Option, ...]


def command(help_text: str, *options: Option) -> Callable[[Handler], Command]:
    def wrap(run: Handler) -> Command:
        return Command(help_text, run, options)

    return wrap

"""cancel_and_wait: a service's stop ends every loop it started, whatever state each is in."""

from __future__ import annotations

import asyncio

import uvloop
from structlog.testing import capture_logs

from sidewinder.common.service import cancel_and_wait


def test_cancel_and_wait_ends_running_finished_and_failed_tasks() -> None:
    ended: list[str] = []

    async def loop_forever() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            ended.append("loop")  # its cleanup ran before cancel_and_wait returned

    async def fail() -> None:
        raise RuntimeError("boom")

    async def run() -> None:
        running = asyncio.create_task(loop_forever(), name="loop")
        failed = asyncio.create_task(fail(), name="failing")
        done = asyncio.create_task(asyncio.sleep(0), name="done")
        await asyncio.sleep(0.01)
        with capture_logs() as logs:
            await cancel_and_wait([running, None, failed, done])
        assert running.cancelled() and ended == ["loop"]
        assert [(e["event"], e["task"]) for e in logs] == [("task.died", "failing")]

    uvloop.run(run())

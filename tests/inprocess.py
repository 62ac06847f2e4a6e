"""A broker in the test's own process: BrokerApp on its own event loop thread, its store in a temp
dir, no name server. A processor test sends it real frames over a real socket and has its answer
in milliseconds, where a broker process takes a second or two to start.

    with InProcessBroker(tmp_path, {"autoCreateTopicEnable": "false"}) as broker:
        reply = broker.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CONFIG))
        broker.app.topics.get("T")          # the broker's own tables, on the loop's thread

Process-level and differential tests stay as they are: this is for what a processor answers.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from interop.ports import lease_port_block
from sidewinder.broker.app import BrokerApp
from sidewinder.broker.config import BrokerConfig
from sidewinder.common.loop_thread import LoopThread
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import RemotingClient

T = TypeVar("T")


class InProcessBroker:
    def __init__(self, root: Path, conf: Mapping[str, str] | None = None) -> None:
        port = lease_port_block((-2, 0, 1))  # the fast channel is listenPort - 2
        values = {
            "brokerIP1": "127.0.0.1",
            "listenPort": str(port),
            "namesrvAddr": "",
            "storePathRootDir": str(root / "store"),
            "storePathCommitLog": str(root / "store" / "commitlog"),
            "mappedFileSizeCommitLog": str(4 << 20),
            "mappedFileSizeConsumeQueue": str(6000),
            **(conf or {}),
        }
        self.config = BrokerConfig.from_properties(values)
        self.addr = f"127.0.0.1:{port}"
        self._loop = LoopThread("inprocess-broker")
        self.app: BrokerApp | None = None
        self._client: RemotingClient | None = None

    def __enter__(self) -> InProcessBroker:
        try:
            self.app = self.call(self._start())
        except BaseException:
            self._loop.stop()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            self.call(self._stop(), timeout_s=30)
        finally:
            self._loop.stop()

    async def _start(self) -> BrokerApp:
        app = BrokerApp(self.config)
        await app.start("127.0.0.1")
        self._client = RemotingClient()
        return app

    async def _stop(self) -> None:
        if self._client is not None:
            await self._client.close()
        if self.app is not None:
            await self.app.stop()

    def call(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 10) -> T:
        """Run a coroutine on the broker's loop (its tables are that thread's)."""
        return self._loop.call(coroutine, timeout_s)

    def invoke(self, request: RemotingCommand, timeout_s: float = 5) -> RemotingCommand:
        """Send `request` to the broker's listen port and return its reply."""
        assert self._client is not None
        return self.call(self._client.invoke(self.addr, request, timeout_s), timeout_s + 1)

    def create_topic(self, topic: str, queues: int) -> None:
        """UPDATE_AND_CREATE_TOPIC, read-write, as mqadmin updateTopic sends it."""
        created = self.invoke(
            RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                {
                    "topic": topic,
                    "defaultTopic": "TBW102",
                    "readQueueNums": str(queues),
                    "writeQueueNums": str(queues),
                    "perm": "6",
                    "topicFilterType": "SINGLE_TAG",
                    "topicSysFlag": "0",
                    "order": "false",
                },
            )
        )
        assert created.code == ResponseCode.SUCCESS, created.remark

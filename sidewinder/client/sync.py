"""Blocking versions of the clients, for scripts, notebooks and threads without an event loop.
Each runs the async client on its own event loop thread; the methods are the async ones, minus
`await`.

    from sidewinder.client.sync import Producer, PushConsumer
    from sidewinder.client.producer import Message

    with Producer("my-group", "127.0.0.1:9876") as producer:
        result = producer.send(Message("Orders", b"..."))

    def on_messages(messages):                    # runs on the consumer's thread pool
        ...

    consumer = PushConsumer("billing", "127.0.0.1:9876", listener=on_messages)
    consumer.subscribe("Orders", "*")
    consumer.start()
    ...
    consumer.close()
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar

from sidewinder.client import admin, consumer, producer, push_consumer, simple_consumer
from sidewinder.client.producer import Message, SendResult
from sidewinder.client.pulling import ReceivedMessage
from sidewinder.client.reply import ReplyMessage
from sidewinder.client.route_cache import MessageQueue
from sidewinder.client.simple_consumer import PoppedMessage
from sidewinder.common.loop_thread import LoopThread

C = TypeVar("C")
T = TypeVar("T")


class _Blocking(Generic[C]):
    """The async client `C`, made and used on a private loop thread."""

    def __init__(self, make: Callable[[], C], name: str) -> None:
        self._thread = LoopThread(name)
        self._client: C = self._call(_build(make))

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._thread.call(coroutine)

    def close(self) -> None:
        try:
            self._call(self._client.close())  # type: ignore[attr-defined]
        finally:
            self._thread.stop()

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _build(make: Callable[[], C]) -> C:
    return make()


class Producer(_Blocking[producer.Producer]):
    def __init__(self, group: str, namesrv_addr: str, **options: Any) -> None:
        super().__init__(lambda: producer.Producer(group, namesrv_addr, **options), "producer")

    def start(self) -> None:
        self._call(self._client.start())

    def send(self, message: Message, **options: Any) -> SendResult:
        return self._call(self._client.send(message, **options))

    def send_oneway(self, message: Message) -> None:
        self._call(self._client.send_oneway(message))

    def request(self, message: Message, timeout_s: float = 3.0) -> ReplyMessage:
        return self._call(self._client.request(message, timeout_s))

    def reply(self, request: ReceivedMessage, body: bytes) -> SendResult:
        return self._call(self._client.reply(request, body))

    @property
    def client_id(self) -> str:
        return self._client.client_id

    def send_batch(self, messages: Sequence[Message]) -> list[SendResult]:
        return self._call(self._client.send_batch(messages))

    def recall(self, sent: SendResult, deliver_at: datetime | int) -> SendResult:
        return self._call(self._client.recall(sent, deliver_at))

    def queues(self, topic: str) -> list[MessageQueue]:
        return self._call(self._client.queues(topic))


class PullConsumer(_Blocking[consumer.PullConsumer]):
    def __init__(self, group: str, namesrv_addr: str, **options: Any) -> None:
        super().__init__(
            lambda: consumer.PullConsumer(group, namesrv_addr, **options), "pull-consumer"
        )

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        self._client.subscribe(topic, expression, expression_type)

    def assign(self, queues: list[MessageQueue]) -> None:
        self._client.assign(queues)

    def assignment(self) -> list[MessageQueue]:
        return self._client.assignment()

    def queues(self, topic: str) -> list[MessageQueue]:
        return self._call(self._client.queues(topic))

    def start(self) -> None:
        self._call(self._client.start())

    def seek(self, queue: MessageQueue, offset: int) -> None:
        self._call(self._client.seek(queue, offset))

    def poll(self, timeout_s: float | None = None) -> list[ReceivedMessage]:
        """Blocks up to `timeout_s` seconds (None: `poll_timeout_s`, 5 s); see the async one."""
        return self._call(self._client.poll(timeout_s))

    def commit(self) -> None:
        self._call(self._client.commit())

    def committed(self, queue: MessageQueue) -> int:
        return self._call(self._client.committed(queue))


class PushConsumer(_Blocking[push_consumer.PushConsumer]):
    """The listener must be a plain function: it runs on the consumer's thread pool."""

    def __init__(self, group: str, namesrv_addr: str, **options: Any) -> None:
        super().__init__(
            lambda: push_consumer.PushConsumer(group, namesrv_addr, **options), "push-consumer"
        )

    @property
    def client_id(self) -> str:
        return self._client.client_id

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        self._client.subscribe(topic, expression, expression_type)

    def assignment(self) -> list[MessageQueue]:
        return self._client.assignment()

    def start(self) -> None:
        self._call(self._client.start())


class SimpleConsumer(_Blocking[simple_consumer.SimpleConsumer]):
    def __init__(self, group: str, namesrv_addr: str, **options: Any) -> None:
        super().__init__(
            lambda: simple_consumer.SimpleConsumer(group, namesrv_addr, **options),
            "simple-consumer",
        )

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        self._client.subscribe(topic, expression, expression_type)

    def start(self) -> None:
        self._call(self._client.start())

    def receive(
        self,
        max_messages: int = 16,
        invisible_duration_s: float | None = None,
        await_duration_s: float | None = None,
    ) -> list[PoppedMessage]:
        return self._call(
            self._client.receive(max_messages, invisible_duration_s, await_duration_s)
        )

    def ack(self, message: PoppedMessage) -> None:
        self._call(self._client.ack(message))

    def change_invisible_duration(
        self, message: PoppedMessage, invisible_duration_s: float
    ) -> PoppedMessage:
        return self._call(self._client.change_invisible_duration(message, invisible_duration_s))


class Admin(_Blocking[admin.Admin]):
    """Every method of `sidewinder.client.admin.Admin`, blocking."""

    def __init__(self, namesrv_addr: str, **options: Any) -> None:
        super().__init__(lambda: admin.Admin(namesrv_addr, **options), "admin")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        method = getattr(self._client, name)

        def blocking(*args: Any, **kwargs: Any) -> Any:
            return self._call(method(*args, **kwargs))

        return blocking

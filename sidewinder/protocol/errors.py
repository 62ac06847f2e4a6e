"""Refusals that carry their response code: a processor raises, one place turns it into a reply.

    raise TopicNotExist(f"topic[{topic}] not exist")
    raise SidewinderError("the body is not a SubscriptionGroupConfig")  # SYSTEM_ERROR
    raise SidewinderError(f"the consumer group[{group}] not online", CONSUMER_NOT_ONLINE)

The remark is RocketMQ's wording where clients or tools read it, and names the value at fault.
"""

from __future__ import annotations

from sidewinder.protocol.codes import ResponseCode


class SidewinderError(Exception):
    """Base of the errors a request can be answered with; `code` is the response code."""

    code: int = ResponseCode.SYSTEM_ERROR

    def __init__(self, remark: str, code: int | None = None) -> None:
        super().__init__(remark)
        if code is not None:
            self.code = code

    @property
    def remark(self) -> str:
        return str(self)


class TopicNotExist(SidewinderError):
    code = ResponseCode.TOPIC_NOT_EXIST


class NoPermission(SidewinderError):
    code = ResponseCode.NO_PERMISSION


class ServiceNotAvailable(SidewinderError):
    code = ResponseCode.SERVICE_NOT_AVAILABLE


class SubscriptionGroupNotExist(SidewinderError):
    code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


class SubscriptionNotExist(SidewinderError):
    code = ResponseCode.SUBSCRIPTION_NOT_EXIST


class SubscriptionParseFailed(SidewinderError):
    code = ResponseCode.SUBSCRIPTION_PARSE_FAILED


class ConsumerNotOnline(SidewinderError):
    code = ResponseCode.CONSUMER_NOT_ONLINE


class BodyError(SidewinderError, ValueError):
    """A request body that does not decode: not UTF-8, not JSON, or not the shape its code
    reads. Answered SYSTEM_ERROR with the problem as remark, as RocketMQ answers the decode
    exception it catches, and as a header that does not decode is. A ValueError too, so
    callers that read bodies of replies keep catching what `body.loads` raised before."""

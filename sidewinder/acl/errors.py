"""The ACL's refusals, worded as RocketMQ 4.9's AclException reaches a client.

RocketMQ's RPC hook throws AclException; NettyRemotingAbstract answers SYSTEM_ERROR (1) with
`RemotingHelper.exceptionSimpleDesc`: the exception's class and message, then the first frame of
its stack. Clients and tools show that remark, so ours is the same, frame included:

    org.apache.rocketmq.acl.common.AclException: No accessKey is configured,
    org.apache.rocketmq.acl.plain.PlainPermissionManager.validate(PlainPermissionManager.java:663)
"""

from __future__ import annotations

from sidewinder.protocol.errors import SidewinderError

_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
_MANAGER = "org.apache.rocketmq.acl.plain.PlainPermissionManager"
_VALIDATOR = "org.apache.rocketmq.acl.plain.PlainAccessValidator"

# The line of 4.9.7's source each refusal is thrown from (the stack frame in the remark).
VALIDATE_NO_ACCESS_KEY = f"{_MANAGER}.validate(PlainPermissionManager.java:663)"
VALIDATE_UNKNOWN_KEY = f"{_MANAGER}.validate(PlainPermissionManager.java:667)"
VALIDATE_SIGNATURE = f"{_MANAGER}.validate(PlainPermissionManager.java:683)"
CHECK_ADMIN = f"{_MANAGER}.checkPerm(PlainPermissionManager.java:580)"
CHECK_DEFAULT_PERM = f"{_MANAGER}.checkPerm(PlainPermissionManager.java:605)"
CHECK_RESOURCE_PERM = f"{_MANAGER}.checkPerm(PlainPermissionManager.java:610)"
PARSE_REQUEST = f"{_VALIDATOR}.parse(PlainAccessValidator.java:134)"


class AclConfigError(ValueError):
    """An ACL file, account or address pattern RocketMQ would refuse; the message is its."""


class AclDenied(SidewinderError):
    """A request the ACL refuses: SYSTEM_ERROR, the remark as RocketMQ's hook gives it."""

    def __init__(self, message: str, frame: str) -> None:
        super().__init__(f"{_EXCEPTION}: {message}, {frame}")
        self.message = message

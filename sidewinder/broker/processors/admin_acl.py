"""ACL admin codes on a broker without access control (aclEnable=false, the only kind this
broker runs as yet): UPDATE_AND_CREATE_ACL_CONFIG (50), DELETE_ACL_CONFIG (51),
GET_BROKER_CLUSTER_ACL_INFO (52), UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53).

    acl = AclAdmin(config)

RocketMQ 4.9 without ACL answers 50, 51 and 53 with their own failure codes (209, 210, 211),
its remark the NullPointerException of the validator it lacks; ours names the reason instead.
It does not answer 52 at all (the handler swallows the exception), so mqadmin's
clusterAclConfigVersion fails on a timeout there; here it fails at once, SYSTEM_ERROR.
"""

from __future__ import annotations

import structlog

from sidewinder.broker.config import BrokerConfig
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.dispatch import RequestContext

log = structlog.get_logger(__name__)


class AclAdmin:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config

    def _disabled(self, action: str) -> str:
        return (
            f"access control is not enabled on broker {self.config.broker_name} "
            f"(aclEnable=false): cannot {action}"
        )

    def _refuse(
        self, ctx: RequestContext, request: RemotingCommand, code: ResponseCode, action: str
    ) -> RemotingCommand:
        log.warning("broker.acl_disabled", remote=ctx.remote_address, code=request.code)
        return request.reply(code, remark=self._disabled(action))

    async def update_access_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        key = (request.ext_fields or {}).get("accessKey", "")
        return self._refuse(
            ctx,
            request,
            ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
            f"update the access config of [{key}]",
        )

    async def delete_access_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        key = (request.ext_fields or {}).get("accessKey", "")
        return self._refuse(
            ctx,
            request,
            ResponseCode.DELETE_ACL_CONFIG_FAILED,
            f"delete the access config of [{key}]",
        )

    async def update_global_white_addrs(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        addrs = (request.ext_fields or {}).get("globalWhiteAddrs", "")
        return self._refuse(
            ctx,
            request,
            ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
            f"update the global white addresses [{addrs}]",
        )

    async def acl_config_version(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        return self._refuse(ctx, request, ResponseCode.SYSTEM_ERROR, "report an ACL config version")

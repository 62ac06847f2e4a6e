"""ACL admin codes: UPDATE_AND_CREATE_ACL_CONFIG (50), DELETE_ACL_CONFIG (51),
GET_BROKER_CLUSTER_ACL_INFO (52), UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53),
GET_BROKER_CLUSTER_ACL_CONFIG (54).

    acl = AclAdmin(config, validator)   # validator None: aclEnable=false

With ACL on they are served as RocketMQ 4.9.8's AdminBrokerProcessor serves them: an account
created or changed in the file that holds it (else the default plain_acl.yml), deleted, or a
file's global white list replaced, each file written whole and atomically with its dataVersion
bumped, and the broker's check following at once; 52 reports each file's version. Failures carry
their own codes (209, 210, 211) and RocketMQ's remarks. 54 answers every account and global white
address as RocketMQ 4.9.7 does: the files read again, secret keys included (RocketMQ 4.9.8
dropped the code altogether). The check lets only admin accounts send 50, 51, 53 and 54
(sidewinder.acl.permission.ACL_ADMIN_CODES), where RocketMQ 4.9 lets any account.

Without ACL, RocketMQ 4.9 answers 50, 51 and 53 with those codes too, its remark the
NullPointerException of the validator it lacks; ours names the reason instead. It does not answer
52 or 54 at all (the handler swallows the exception), so mqadmin's clusterAclConfigVersion fails on
a timeout there; here they fail at once, SYSTEM_ERROR.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import NoReturn

import structlog

from sidewinder.acl.errors import AclConfigError
from sidewinder.acl.plain import PlainAccessConfig, all_acl_config
from sidewinder.acl.resources import java_hash_map_order
from sidewinder.acl.validator import AclValidator
from sidewinder.broker.config import BrokerConfig
from sidewinder.protocol import body
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.data_version import DataVersion
from sidewinder.protocol.errors import SidewinderError
from sidewinder.remoting.dispatch import RequestContext

log = structlog.get_logger(__name__)


def _split(text: str | None) -> list[str] | None:
    """UtilAll.split(text, ","): None stays None, an empty text is one empty entry."""
    return None if text is None else text.split(",")


def _version_json(version: DataVersion) -> str:
    return json.dumps(version.to_json(), separators=(",", ":"))


class AclAdmin:
    def __init__(self, config: BrokerConfig, validator: AclValidator | None = None) -> None:
        self.config = config
        self.validator = validator
        self._writing = asyncio.Lock()  # one write at a time, as RocketMQ's synchronized

    def _disabled(self, action: str) -> str:
        return (
            f"access control is not enabled on broker {self.config.broker_name} "
            f"(aclEnable=false): cannot {action}"
        )

    def _refuse(
        self, ctx: RequestContext, request: RemotingCommand, code: ResponseCode, action: str
    ) -> NoReturn:
        log.warning("broker.acl_disabled", remote=ctx.remote_address, code=request.code)
        raise SidewinderError(self._disabled(action), code)

    async def _write(
        self,
        request: RemotingCommand,
        failed: ResponseCode,
        failure: str,
        change: Callable[[], bool],
    ) -> RemotingCommand:
        """Run a file change off the loop, then reload the check from the files."""
        assert self.validator is not None
        validator = self.validator
        loop = asyncio.get_running_loop()

        def run() -> bool:
            done = change()
            validator.reload()
            return done

        async with self._writing:
            try:
                done = await loop.run_in_executor(None, run)
            except (AclConfigError, OSError) as exc:
                log.warning("acl.update_failed", code=request.code, error=str(exc))
                raise SidewinderError(str(exc), failed) from None
        if not done:
            log.warning("acl.update_failed", code=request.code, error=failure)
            raise SidewinderError(failure, failed)
        return request.reply(ResponseCode.SUCCESS)

    async def update_access_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        ext = request.ext_fields or {}
        key = ext.get("accessKey", "")
        if self.validator is None:
            self._refuse(
                ctx,
                request,
                ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
                f"update the access config of [{key}]",
            )
        config = PlainAccessConfig(
            access_key=ext.get("accessKey"),
            secret_key=ext.get("secretKey"),
            white_remote_address=ext.get("whiteRemoteAddress"),
            admin=ext.get("admin", "false").lower() == "true",
            default_topic_perm=ext.get("defaultTopicPerm"),
            default_group_perm=ext.get("defaultGroupPerm"),
            topic_perms=_split(ext.get("topicPerms")),
            group_perms=_split(ext.get("groupPerms")),
        )
        files, validator = self.validator.files, self.validator
        return await self._write(
            request,
            ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
            f"The accesskey[{key}] corresponding to accessConfig has been updated failed.",
            lambda: files.update_account(config, validator.snapshot),
        )

    async def delete_access_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        key = (request.ext_fields or {}).get("accessKey", "")
        if self.validator is None:
            self._refuse(
                ctx,
                request,
                ResponseCode.DELETE_ACL_CONFIG_FAILED,
                f"delete the access config of [{key}]",
            )
        log.info("acl.delete_access_config", remote=ctx.remote_address, access_key=key)
        files, validator = self.validator.files, self.validator
        return await self._write(
            request,
            ResponseCode.DELETE_ACL_CONFIG_FAILED,
            f"The accesskey[{key}] corresponding to accessConfig has been deleted failed.",
            lambda: files.delete_account(key, validator.snapshot),
        )

    async def update_global_white_addrs(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        ext = request.ext_fields or {}
        addrs = ext.get("globalWhiteAddrs")
        if self.validator is None:
            self._refuse(
                ctx,
                request,
                ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                f"update the global white addresses [{addrs or ''}]",
            )
        files = self.validator.files
        listed = _split(addrs)
        return await self._write(
            request,
            ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
            f"The globalWhiteAddresses[{addrs}] has been updated failed.",
            lambda: (
                listed is not None and files.update_global_white(listed, ext.get("aclFileFullPath"))
            ),
        )

    async def acl_config_version(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        if self.validator is None:
            self._refuse(ctx, request, ResponseCode.SYSTEM_ERROR, "report an ACL config version")
        snapshot = self.validator.snapshot
        versions = {str(path): version.to_json() for path, version in snapshot.versions.items()}
        ordered = dict(java_hash_map_order(versions))
        return request.reply(
            ResponseCode.SUCCESS,
            ext_fields={
                "version": _version_json(snapshot.default_version),
                "allAclFileVersion": json.dumps(ordered, separators=(",", ":")),
                "brokerAddr": self.config.broker_addr,
                "brokerName": self.config.broker_name,
                "clusterName": self.config.broker_cluster_name,
            },
        )

    async def cluster_acl_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GetBrokerClusterAclConfigResponseBody: no header field (the Java header's only one
        is never set), the body in fastjson's field order."""
        if self.validator is None:
            self._refuse(ctx, request, ResponseCode.SYSTEM_ERROR, "report its ACL config")
        files = list(self.validator.snapshot.files)
        loop = asyncio.get_running_loop()
        try:
            config = await loop.run_in_executor(None, all_acl_config, files)
        except (AclConfigError, OSError) as exc:
            raise SidewinderError(str(exc), ResponseCode.SYSTEM_ERROR) from None
        return request.reply(ResponseCode.SUCCESS, body=body.dumps(config).encode())

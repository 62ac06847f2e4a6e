"""Broker config admin: UPDATE_BROKER_CONFIG (25), GET_BROKER_CONFIG (26).

    configs = BrokerConfigAdmin(config, conf_path, data_version, permission_changed=app.reregister)

An update is checked whole (black-listed keys refused with NO_PERMISSION, bad values with
SYSTEM_ERROR naming them), applied in place where the key is live, and written into the conf
file the broker started from (its lines and comments kept; temp file, fsync, rename). Keys the
broker reads only at start (RESTART_KEYS) are written and take effect at the next start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import structlog

from sidewinder.broker.config import (
    RESTART_KEYS,
    BrokerConfig,
    ConfigError,
    apply_update,
    black_listed,
)
from sidewinder.common.properties import parse_properties, update_properties_file
from sidewinder.protocol import body
from sidewinder.protocol.codes import ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.data_version import DataVersion
from sidewinder.protocol.errors import NoPermission, SidewinderError
from sidewinder.remoting.dispatch import RequestContext

log = structlog.get_logger(__name__)


class BrokerConfigAdmin:
    def __init__(
        self,
        config: BrokerConfig,
        conf_path: Path,
        *,
        permission_changed: Callable[[], Awaitable[None]],
    ) -> None:
        self.config = config
        self.conf_path = conf_path
        # RocketMQ's Configuration keeps a data version of its own, bumped per update.
        self.data_version = DataVersion()
        self.permission_changed = permission_changed
        self._lock = asyncio.Lock()

    async def update(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if not request.body:
            return request.reply(ResponseCode.SUCCESS)
        try:
            values = parse_properties(request.body_bytes.decode(), source="updateBrokerConfig")
        except ValueError as exc:
            raise SidewinderError(f"string2Properties error: {exc}") from None
        refused = black_listed(self.config, values)
        if refused:
            raise NoPermission(f"Can not update config in black list. ({', '.join(refused)})")
        async with self._lock:  # one update at a time reaches the file
            try:
                known = apply_update(self.config, values)
            except ConfigError as exc:
                raise SidewinderError(str(exc)) from None
            self.data_version.bump()
            if known:
                await asyncio.get_running_loop().run_in_executor(
                    None, update_properties_file, self.conf_path, known
                )
        ignored = sorted(set(values) - set(known))
        log.info(
            "broker.config_updated",
            remote=ctx.remote_address,
            keys=sorted(known),
            at_restart=sorted(set(known) & RESTART_KEYS),
            ignored_unknown=ignored,
        )
        if "brokerPermission" in known:
            # Name servers learn the new permission at once, as RocketMQ re-registers.
            await self.permission_changed()
        return request.reply(ResponseCode.SUCCESS)

    async def get(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        text = "".join(f"{k}={v}\n" for k, v in self.config.as_properties().items())
        return request.reply(
            ResponseCode.SUCCESS,
            ext_fields={"version": body.dumps(self.data_version.to_json())},
            body=text.encode(),
        )

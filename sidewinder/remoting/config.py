"""The remoting server's section of broker.conf / namesrv.conf (RocketMQ's NettyServerConfig)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sidewinder.common.config import camel
from sidewinder.remoting.codec import DEFAULT_MAX_FRAME


class ServerConfig(BaseModel):
    model_config = ConfigDict(
        alias_generator=camel, populate_by_name=True, frozen=True, extra="ignore"
    )

    listen_port: int = Field(10911, ge=0, le=65535)
    server_channel_max_idle_time_seconds: int = Field(120, ge=0)
    # com.rocketmq.remoting.frameMaxLength in RocketMQ (a system property there).
    frame_max_length: int = Field(DEFAULT_MAX_FRAME, gt=8)

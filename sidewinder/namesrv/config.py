"""namesrv.conf: RocketMQ's NamesrvConfig keys plus the remoting server's (one flat file)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sidewinder.common.config import camel, from_properties
from sidewinder.common.metrics_server import DEFAULT_PORT, MetricsExporterType
from sidewinder.remoting.config import ServerConfig
from sidewinder.remoting.tls import TLS_KEYS, TlsConfig


def _text(value: object) -> str:
    return str(value.value) if isinstance(value, Enum) else str(value)


_SECTIONS = ("server", "tls")


def _home() -> Path:
    return Path.home() / "namesrv"


class NamesrvConfig(BaseModel):
    # Not frozen: updateNamesrvConfig sets keys on the running instance.
    model_config = ConfigDict(
        alias_generator=camel, populate_by_name=True, validate_assignment=True, extra="ignore"
    )

    rocketmq_home: str = ""
    kv_config_path: Path = Field(default_factory=lambda: _home() / "kvConfig.json")
    config_store_path: Path = Field(default_factory=lambda: _home() / "namesrv.properties")
    product_env_name: str = "center"
    cluster_test: bool = False
    order_message_enable: bool = False
    # The broker's Prometheus exporter keys, for the name server's own /metrics.
    metrics_exporter_type: MetricsExporterType = MetricsExporterType.DISABLE
    metrics_prom_exporter_host: str = "0.0.0.0"
    metrics_prom_exporter_port: int = Field(DEFAULT_PORT, ge=0, le=65535)
    metrics_label: str = ""
    server: ServerConfig = Field(default_factory=lambda: ServerConfig(listen_port=9876))
    # RocketMQ's TLS system properties (tls.*), here keys of namesrv.conf; not in `-p`.
    tls: TlsConfig = Field(default_factory=TlsConfig)

    @classmethod
    def from_properties(cls, values: Mapping[str, Any]) -> NamesrvConfig:
        server_values = {"listenPort": "9876", **values}
        server = from_properties(ServerConfig, server_values, "namesrv.conf")
        tls = TlsConfig.load(values)
        own = from_properties(
            cls, {k: v for k, v in values.items() if k not in _SECTIONS}, "namesrv.conf"
        )
        return own.model_copy(update={"server": server, "tls": tls})

    @classmethod
    def conf_keys(cls) -> set[str]:
        own = {f.alias or name for name, f in cls.model_fields.items() if name not in _SECTIONS}
        server = {f.alias or name for name, f in ServerConfig.model_fields.items()}
        return own | server | TLS_KEYS

    def as_properties(self) -> dict[str, str]:
        """Every effective setting as key=value text (`mqnamesrv -p`)."""
        out = {
            f.alias or name: _text(getattr(self, name))
            for name, f in type(self).model_fields.items()
            if name not in _SECTIONS
        }
        for name, f in ServerConfig.model_fields.items():
            out[f.alias or name] = str(getattr(self.server, name))
        return {k: v.lower() if v in ("True", "False") else v for k, v in sorted(out.items())}


def apply_namesrv_update(config: NamesrvConfig, values: Mapping[str, str]) -> dict[str, str]:
    """Validate `values` and set the name server's own keys on `config` in place; the
    server's keys (its socket) are validated and returned to persist, for the next start.
    Unknown keys are left out, as RocketMQ's Configuration drops them; a bad value raises
    ConfigError naming it and changes nothing."""
    own_fields = {
        f.alias or n: n for n, f in NamesrvConfig.model_fields.items() if n not in _SECTIONS
    }
    server_fields = {f.alias or n for n, f in ServerConfig.model_fields.items()}
    own = {k: v for k, v in values.items() if k in own_fields}
    server = {k: v for k, v in values.items() if k in server_fields}
    current = config.model_dump(by_alias=True, exclude=set(_SECTIONS))
    candidate = from_properties(NamesrvConfig, {**current, **own}, "updateNamesrvConfig")
    if server:
        now = config.server.model_dump(by_alias=True)
        from_properties(ServerConfig, {**now, **server}, "updateNamesrvConfig")
    for key in own:
        setattr(config, own_fields[key], getattr(candidate, own_fields[key]))
    return {**own, **server}

"""The keys and TLS settings every request of our mqadmin uses, found as RocketMQ's tools find
them.

    DEFAULT_CREDENTIALS.set(tool_credentials(args.access_key, args.secret_key))
    DEFAULT_CLIENT_TLS.set(tool_tls(args.tls, args.tls_config))
"""

from __future__ import annotations

from pathlib import Path

from sidewinder.client.keys import configured_credentials
from sidewinder.protocol.acl import Credentials
from sidewinder.remoting.tls import TlsConfig, TlsError, TlsOption


def tool_credentials(access_key: str | None, secret_key: str | None) -> Credentials | None:
    """The keys every request is signed with: the options, else RocketMQ's mqadmin's
    `$ROCKETMQ_HOME/conf/tools.yml` (accessKey, secretKey), else none."""
    return configured_credentials(access_key, secret_key)


def tool_tls(enabled: bool, config_file: str | None) -> TlsOption:
    """--tls: RocketMQ's client with -Dtls.enable=true (the keys of
    /etc/rocketmq/tls.properties when it exists); --tls-config FILE: the keys of FILE, which
    must exist (tls.test.mode.enable, tls.client.authServer, tls.client.trustCertPath, ...)."""
    if config_file is None:
        return True if enabled else None
    if not Path(config_file).is_file():
        raise TlsError(f"--tls-config {config_file}: no such file")
    return TlsConfig.load({"tls.config.file": config_file})

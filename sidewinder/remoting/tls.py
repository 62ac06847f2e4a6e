"""RocketMQ 4.x's TLS settings (TlsSystemConfig's keys) and the SSL contexts they make.

    tls = TlsConfig.load({"tls.server.mode": "enforcing"})   # + the tls.config.file's keys
    server_tls = ServerTls(tls)              # for RemotingServer: the mode and a server context
    context = client_context(tls)            # for RemotingClient(tls=...)

The keys and defaults are RocketMQ 4.9's: `tls.server.mode` permissive, `tls.test.mode.enable`
true (the server makes itself a self-signed certificate and a client trusts any server, whatever
the certificate settings say), `tls.config.file` /etc/rocketmq/tls.properties. RocketMQ reads the
keys from system properties, then lets the file override all of them but `tls.server.mode`,
`tls.enable` and `tls.config.file`; here broker.conf / namesrv.conf (or the mapping given to
`load`) plays the system properties' part. Departures: an unknown `tls.server.mode` is refused
(RocketMQ falls back to permissive); a client certificate the server asks for
(`tls.server.need.client.auth` optional or require) is verified against
`tls.server.trustCertPath` (or the system's CAs) even with `tls.server.authClient` false, where
RocketMQ takes any; test mode asks no client certificate (RocketMQ's asks one optionally).
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import ssl
import tempfile
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sidewinder.common.log import library_logger
from sidewinder.common.properties import read_properties

log = library_logger(__name__)

DEFAULT_CONFIG_FILE = "/etc/rocketmq/tls.properties"
# Keys the file cannot set (RocketMQ's extractTlsConfigFromFile leaves them alone).
NOT_FROM_FILE = frozenset({"tls.server.mode", "tls.enable", "tls.config.file"})
HANDSHAKE_MAGIC = 0x16  # a TLS record of type handshake: how a ClientHello starts
# How long a closing TLS connection waits for the peer's close_notify. Netty's SslHandler
# (RocketMQ's both sides) sends its own and closes without waiting for one, and RocketMQ never
# answers ours: asyncio's default, 30 s, held every close to a RocketMQ peer that long.
SSL_SHUTDOWN_TIMEOUT_S = 0.25


class TlsError(ValueError):
    """TLS settings that cannot be used; the message names the key or the file."""


class TlsMode(enum.Enum):
    DISABLED = "disabled"  # plain only; a TLS handshake is closed
    PERMISSIVE = "permissive"  # both, told apart by the first byte
    ENFORCING = "enforcing"  # TLS only; a plain connection is closed


class ClientAuth(enum.Enum):
    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"


class TlsConfig(BaseModel):
    """Every key of RocketMQ's TlsSystemConfig, under its own name."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="ignore")

    server_mode: TlsMode = Field(TlsMode.PERMISSIVE, alias="tls.server.mode")
    enable: bool = Field(False, alias="tls.enable")
    config_file: str = Field(DEFAULT_CONFIG_FILE, alias="tls.config.file")
    test_mode_enable: bool = Field(True, alias="tls.test.mode.enable")
    server_need_client_auth: ClientAuth = Field(
        ClientAuth.NONE, alias="tls.server.need.client.auth"
    )
    server_key_path: str | None = Field(None, alias="tls.server.keyPath")
    server_key_password: str | None = Field(None, alias="tls.server.keyPassword")
    server_cert_path: str | None = Field(None, alias="tls.server.certPath")
    server_auth_client: bool = Field(False, alias="tls.server.authClient")
    server_trust_cert_path: str | None = Field(None, alias="tls.server.trustCertPath")
    client_key_path: str | None = Field(None, alias="tls.client.keyPath")
    client_key_password: str | None = Field(None, alias="tls.client.keyPassword")
    client_cert_path: str | None = Field(None, alias="tls.client.certPath")
    client_auth_server: bool = Field(False, alias="tls.client.authServer")
    client_trust_cert_path: str | None = Field(None, alias="tls.client.trustCertPath")

    @field_validator("*", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip()
            return value.lower() if value.lower() in _LOWERED else (value or None)
        return value

    @classmethod
    def load(cls, properties: Mapping[str, Any] | None = None) -> TlsConfig:
        """The settings from `properties` (the tls.* keys of a conf file; others are ignored),
        then from the file named by tls.config.file when it exists, as RocketMQ reads them."""
        given = {k: v for k, v in (properties or {}).items() if k in TLS_KEYS}
        path = Path(str(given.get("tls.config.file") or DEFAULT_CONFIG_FILE))
        values = dict(given)
        if path.is_file():
            try:
                from_file = read_properties(path)
            except OSError as exc:
                raise TlsError(f"cannot read tls.config.file {path}: {exc}") from None
            values |= {k: v for k, v in from_file.items() if k in TLS_KEYS - NOT_FROM_FILE}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = [
                f"{_alias(err['loc'])}={err.get('input')!r}: {err['msg']}" for err in exc.errors()
            ]
            raise TlsError("bad TLS setting(s): " + "; ".join(problems)) from None

    @property
    def client_enabled(self) -> bool:
        """Whether a server process's own client calls (a broker's to its name servers) use
        TLS: tls.enable, else whether this server enforces it (RocketMQ's BrokerStartup)."""
        return self.enable or self.server_mode is TlsMode.ENFORCING


TLS_KEYS = frozenset(f.alias for f in TlsConfig.model_fields.values() if f.alias)
_LOWERED = {"true", "false", *(m.value for m in TlsMode), *(a.value for a in ClientAuth)}


def _alias(loc: tuple[int | str, ...]) -> str:
    name = str(loc[0]) if loc else "?"
    field = TlsConfig.model_fields.get(name)
    return field.alias if field is not None and field.alias else name


# -- contexts ------------------------------------------------------------------------------------
def client_context(config: TlsConfig) -> ssl.SSLContext:
    """What RocketMQ's client builds: in test mode, or without tls.client.authServer, any
    server certificate is taken; otherwise it must chain to tls.client.trustCertPath (else the
    system's CAs). Host names are not checked, as Netty's handler does not check them."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    if config.test_mode_enable or not config.client_auth_server:
        context.verify_mode = ssl.CERT_NONE
        if config.test_mode_enable:
            return context
    else:
        _trust(context, config.client_trust_cert_path, "tls.client.trustCertPath")
    if config.client_cert_path or config.client_key_path:
        _load_chain(
            context,
            config.client_cert_path,
            config.client_key_path,
            config.client_key_password,
            "tls.client",
        )
    return context


def server_context(config: TlsConfig) -> ssl.SSLContext:
    """The server's context from its files; in test mode, from a fresh self-signed
    certificate (the files unread, as RocketMQ's test mode ignores them)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if config.test_mode_enable:
        if config.server_cert_path or config.server_key_path:
            log.warning(
                "tls.test_mode_ignores_files",
                hint="tls.test.mode.enable=false to serve tls.server.certPath",
            )
        with tempfile.TemporaryDirectory(prefix="sidewinder-tls-") as tmp:
            cert, key = write_self_signed(Path(tmp), "localhost")
            context.load_cert_chain(cert, key)
        return context
    if not config.server_cert_path or not config.server_key_path:
        raise TlsError(
            "tls.server.certPath and tls.server.keyPath are needed when tls.test.mode.enable "
            "is false"
        )
    _load_chain(
        context,
        config.server_cert_path,
        config.server_key_path,
        config.server_key_password,
        "tls.server",
    )
    if config.server_need_client_auth is not ClientAuth.NONE:
        context.verify_mode = (
            ssl.CERT_REQUIRED
            if config.server_need_client_auth is ClientAuth.REQUIRE
            else ssl.CERT_OPTIONAL
        )
        _trust(context, config.server_trust_cert_path, "tls.server.trustCertPath")
    return context


def _trust(context: ssl.SSLContext, path: str | None, key: str) -> None:
    context.verify_mode = ssl.CERT_REQUIRED
    if not path:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        return
    try:
        context.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"{key}={path}: {exc}") from None


def _load_chain(
    context: ssl.SSLContext,
    cert: str | None,
    key: str | None,
    password: str | None,
    prefix: str,
) -> None:
    if not cert or not key:
        raise TlsError(f"{prefix}.certPath and {prefix}.keyPath go together")
    try:
        context.load_cert_chain(cert, key, password)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"{prefix}.certPath={cert} / {prefix}.keyPath={key}: {exc}") from None


def write_self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed EC certificate for `name` (and 127.0.0.1) with its PKCS#8 key, as PEM
    files in `directory`: (cert, key). Valid from a day ago for a year."""
    import ipaddress

    # Imported here: only test mode needs it, and loading it costs tens of ms at every start.
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(name), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class ServerTls:
    """A server process's TLS: its mode and its one context, shared by its listeners. The
    context from files is made by `check` (at start: bad files stop the start); test mode's
    self-signed one on the first TLS connection, off the loop."""

    def __init__(self, config: TlsConfig) -> None:
        self.config = config
        self.mode = config.server_mode
        self._context: ssl.SSLContext | None = None
        self._making: asyncio.Future[ssl.SSLContext] | None = None

    def check(self) -> None:
        if self.mode is not TlsMode.DISABLED and not self.config.test_mode_enable:
            self._context = server_context(self.config)
        log.info("tls.server", mode=self.mode.value, test_mode=self.config.test_mode_enable)

    async def context(self) -> ssl.SSLContext:
        if self._context is not None:
            return self._context
        if self._making is None:
            loop = asyncio.get_running_loop()
            self._making = asyncio.ensure_future(
                loop.run_in_executor(None, server_context, self.config)
            )
        context = await asyncio.shield(self._making)
        self._context = context
        return context


TlsOption = bool | ssl.SSLContext | TlsConfig | None

# The TLS of the clients made without a `tls=` of their own in this context: a tool (our
# mqadmin's --tls) sets it once for every client its sub-commands make.
DEFAULT_CLIENT_TLS: ContextVar[TlsOption] = ContextVar("DEFAULT_CLIENT_TLS", default=None)


def resolve_client_tls(tls: TlsOption) -> ssl.SSLContext | None:
    """A client's `tls=` option as a context: None DEFAULT_CLIENT_TLS (plain unless set); False
    plain; True as RocketMQ's client with `-Dtls.enable=true` (the settings of
    /etc/rocketmq/tls.properties when it exists, else its defaults: any server certificate
    taken); a TlsConfig its settings; a context as is."""
    if tls is None:
        tls = DEFAULT_CLIENT_TLS.get()
    if tls is None or tls is False:
        return None
    if isinstance(tls, ssl.SSLContext):
        return tls
    if tls is True:
        return client_context(TlsConfig.load({}))
    return client_context(tls)

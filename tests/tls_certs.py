"""Certificates for TLS tests, made at test time: a CA, a server certificate for 127.0.0.1 and
localhost with an encrypted PKCS#8 key, and a client certificate, as PEM files; and RocketMQ's
TLS settings for a server and its clients in either mode (`enforcing`, `permissive`)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from interop.rocketmq import write_properties
from sidewinder.remoting.tls import TlsConfig, TlsOption

PASSWORD = "s3cret"
NO_FILE = "/nonexistent/tls.properties"  # never the machine's /etc/rocketmq/tls.properties


@dataclass(frozen=True)
class CertSet:
    ca_cert: Path
    server_cert: Path
    server_key: Path  # encrypted with `password` (PBES2: Python reads it, RocketMQ 4.9's Netty not)
    server_key_plain: Path  # the same key unencrypted
    client_cert: Path
    client_key: Path  # not encrypted
    password: str = PASSWORD


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey, password: str | None) -> Path:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    )
    return path


def make_certs(directory: Path) -> CertSet:
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("sidewinder test CA"))
        .issuer_name(_name("sidewinder test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_path = directory / "ca.crt"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))

    def leaf(
        common_name: str, usage: x509.ObjectIdentifier
    ) -> tuple[bytes, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        return cert.public_bytes(serialization.Encoding.PEM), key

    server_pem, server_key = leaf("127.0.0.1", ExtendedKeyUsageOID.SERVER_AUTH)
    client_pem, client_key = leaf("sidewinder test client", ExtendedKeyUsageOID.CLIENT_AUTH)
    (directory / "server.crt").write_bytes(server_pem)
    (directory / "client.crt").write_bytes(client_pem)
    return CertSet(
        ca_cert=ca_path,
        server_cert=directory / "server.crt",
        server_key=_write_key(directory / "server.key", server_key, PASSWORD),
        server_key_plain=_write_key(directory / "server-plain.key", server_key, None),
        client_cert=directory / "client.crt",
        client_key=_write_key(directory / "client.key", client_key, None),
    )


def enforcing(workdir: Path, certs: CertSet) -> tuple[dict[str, str], dict[str, str], TlsOption]:
    """Server settings in a tls.config.file (certificate files); clients that verify."""
    server_file = workdir / "tls.properties"
    write_properties(
        server_file,
        {
            "tls.test.mode.enable": "false",
            "tls.server.certPath": certs.server_cert,
            "tls.server.keyPath": certs.server_key_plain,
            "tls.server.need.client.auth": "none",
        },
    )
    server = {"tls.server.mode": "enforcing", "tls.config.file": str(server_file)}
    verifying = {
        "tls.config.file": NO_FILE,
        "tls.test.mode.enable": "false",
        "tls.client.authServer": "true",
        "tls.client.trustCertPath": str(certs.ca_cert),
    }
    return server, {"tls.enable": "true", **verifying}, TlsConfig.load(verifying)


def permissive() -> tuple[dict[str, str], dict[str, str], TlsOption]:
    """RocketMQ's defaults but the mode: test mode, a self-signed server, trusting clients."""
    server = {"tls.server.mode": "permissive", "tls.config.file": NO_FILE}
    client = {"tls.enable": "true", "tls.config.file": NO_FILE}
    return server, client, TlsConfig.load({"tls.config.file": NO_FILE})

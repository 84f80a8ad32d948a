"""Certificates for the TLS tests: a ``pki`` directory with a server certificate, a
client CA, a client it signed, a rogue client and a key that matches nothing."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _certificate(subject: str, key, issuer_key=None, issuer=None, *, ca=False) -> x509.Certificate:
    """A day-long certificate for ``subject`` signed by ``issuer`` (self-signed without)."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.subject if issuer is not None else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        sans = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key or key, hashes.SHA256())


def _write(directory: Path, stem: str, key, cert: x509.Certificate) -> None:
    (directory / f"{stem}.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (directory / f"{stem}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """server.{crt,key} (self-signed, localhost), ca.crt, client.* signed by that CA,
    rogue.* signed by another CA, and other.key that matches nothing."""
    directory = tmp_path_factory.mktemp("pki")
    server_key = ec.generate_private_key(ec.SECP256R1())
    _write(directory, "server", server_key, _certificate("localhost", server_key))
    for stem, ca_stem in (("client", "ca"), ("rogue", "rogue-ca")):
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = _certificate(f"{ca_stem} test CA", ca_key, ca=True)
        _write(directory, ca_stem, ca_key, ca_cert)
        key = ec.generate_private_key(ec.SECP256R1())
        _write(directory, stem, key, _certificate(stem, key, ca_key, ca_cert))
    other = ec.generate_private_key(ec.SECP256R1())
    _write(directory, "other", other, _certificate("other", other))
    return directory


def channel_credentials(pki: Path, client: str | None = None) -> grpc.ChannelCredentials:
    key = (pki / f"{client}.key").read_bytes() if client else None
    chain = (pki / f"{client}.crt").read_bytes() if client else None
    return grpc.ssl_channel_credentials((pki / "server.crt").read_bytes(), key, chain)


TLS_OPTIONS = [("grpc.ssl_target_name_override", "localhost")]

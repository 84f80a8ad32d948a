"""Server options that change how clients reach it: TLS, reflection, --require-gpu."""

from __future__ import annotations

import datetime
import ipaddress

import grpc
import pytest
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_api.nmt.v1 import translator_pb2_grpc as pb_grpc
from service.server import SERVICE_NAME, ServerError, main
from tests.service.server_helpers import TIMEOUT, rpc_error
from tests.service.tls_fixtures import TLS_OPTIONS, channel_credentials


def _self_signed(tmp_path) -> tuple:
    """A certificate and key for 127.0.0.1 (PEM files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "server.crt", tmp_path / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_tls(server_factory, tmp_path):
    cert, key = _self_signed(tmp_path)
    server = server_factory(server={"tls_cert": cert, "tls_key": key})
    address = f"127.0.0.1:{server.port}"
    credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
    with grpc.secure_channel(address, credentials) as channel:
        response = pb_grpc.TranslatorStub(channel).Translate(
            pb.TranslateRequest(texts=["A short sentence."]), timeout=TIMEOUT
        )
        assert len(response.translations) == 1
    with grpc.insecure_channel(address) as channel:  # plaintext is refused
        exc = rpc_error(
            lambda: pb_grpc.TranslatorStub(channel).Translate(
                pb.TranslateRequest(texts=["A short sentence."]), timeout=5
            )
        )
        assert exc.code() == grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize("enabled", [True, False], ids=["on", "off"])
def test_reflection_only_when_asked(server_factory, enabled):
    server = server_factory(server={"reflection": enabled})
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        if enabled:
            services = set(database.get_services())
            assert {SERVICE_NAME, "grpc.health.v1.Health"} <= services
            symbol = database.FindFileContainingSymbol(SERVICE_NAME)
            assert symbol.package == "nmt.v1"
        else:
            with pytest.raises(grpc.RpcError) as info:
                database.get_services()
            assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_require_gpu_without_cuda_in_providers_is_a_one_line_error(tmp_path, capsys):
    code = main(["--require-gpu", "--providers", "cpu", "--port", "0", "--metrics-port", "-1"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.splitlines() == [
        "nmt-serve: error: --require-gpu is set but --providers cpu leaves out CUDA; "
        "add cuda to --providers"
    ]


def test_every_loaded_model_has_its_info_series(tiny_bundle, tmp_path):
    """Two models in the repository: one nmt_model_info series each, named as clients
    name them (the directory), like ListModels."""
    import shutil

    from tests.service.server_fixtures import ServerFactory

    for name in ("alpha", "beta"):
        shutil.copytree(tiny_bundle.bundle_dir, tmp_path / name / "1")
    factory = ServerFactory(tmp_path)
    try:
        server = factory(warm=False, start=False)
        reg = server.registry
        for name in ("alpha", "beta"):
            labels = {"model": name, "version": "1", "provider": "CPUExecutionProvider"}
            assert reg.get_sample_value("nmt_model_info", labels) == 1
        listed = server.servicer.models()
        assert [m.name for m in listed.models] == ["alpha", "beta"]
    finally:
        factory.close()


def test_mutual_tls_through_the_server(server_factory, pki):
    server = server_factory(
        server={
            "tls_cert": pki / "server.crt",
            "tls_key": pki / "server.key",
            "tls_client_ca": pki / "ca.crt",
        }
    )
    request = pb.TranslateRequest(texts=["A short sentence."])

    def call(client: str | None):
        credentials = channel_credentials(pki, client)
        address = f"127.0.0.1:{server.port}"
        with grpc.secure_channel(address, credentials, TLS_OPTIONS) as channel:
            return pb_grpc.TranslatorStub(channel).Translate(request, timeout=TIMEOUT)

    assert len(call("client").translations) == 1
    for stranger in (None, "rogue"):  # no certificate, or one another CA signed
        assert rpc_error(lambda c=stranger: call(c)).code() == grpc.StatusCode.UNAVAILABLE


def test_cli_key_that_does_not_match_the_certificate_is_one_line(tiny_bundle, pki, capsys):
    args = ["--model-repository", str(tiny_bundle.repo), "--port", "0", "--metrics-port", "-1"]
    tls = ["--tls-cert", str(pki / "server.crt"), "--tls-key", str(pki / "other.key")]
    assert main([*args, "--providers", "cpu", *tls]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "does not match the certificate" in err[0], err
    ca = ["--tls-client-ca", str(pki / "ca.crt")]
    assert main([*args, "--providers", "cpu", *ca]) == 2
    assert "--tls-client-ca needs --tls-cert" in capsys.readouterr().err


def test_localhost_takes_every_loopback_or_nothing(server_factory):
    import socket

    server = server_factory(warm=False, start=False, server={"host": "localhost"})
    for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        with socket.socket(family) as probe:
            try:
                probe.bind((address, server.port))
            except OSError:
                continue  # taken by the server: good
            if family == socket.AF_INET6 and not _has_ipv6_loopback():
                continue
            raise AssertionError(f"{address}:{server.port} is free: the server did not bind it")
    # The same port again: refused with the address named, not half bound.
    with pytest.raises(ServerError, match=r"could not bind gRPC to 127\.0\.0\.1:\d+"):
        server_factory(warm=False, start=False, server={"host": "localhost", "port": server.port})


def _has_ipv6_loopback() -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False

"""Server options that change how clients reach it: TLS, reflection, --require-gpu."""

from __future__ import annotations

import datetime
import ipaddress
import time

import grpc
import pytest
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from service.proto.nmt.v1 import translator_pb2 as pb
from service.proto.nmt.v1 import translator_pb2_grpc as pb_grpc
from service.server import SERVICE_NAME, main
from tests.service.server_helpers import TIMEOUT, rpc_error


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
        listed = server.servicer.ListModels(pb.ListModelsRequest(), None)
        assert [m.name for m in listed.models] == ["alpha", "beta"]
    finally:
        factory.close()


class _GoneClient:
    """A servicer context whose RPC already ended: add_callback refuses the callback."""

    def __init__(self) -> None:
        self.code = self.details = None

    def add_callback(self, callback) -> bool:
        return False

    def time_remaining(self):
        return 30.0

    def set_code(self, code) -> None:
        self.code = code

    def set_details(self, details) -> None:
        self.details = details


def test_job_of_a_client_gone_before_add_callback_is_cancelled(server_factory, tiny_bundle):
    server = server_factory(max_live_rows=40, max_beam_size=6, max_target_length=4000)
    context = _GoneClient()
    request = pb.TranslateRequest(
        texts=[tiny_bundle.sentences[0]],
        options=pb.DecodeOptions(
            strategy=pb.STRATEGY_BEAM, beam_size=5, max_length=4000, max_length_ratio=100.0
        ),
    )
    start = time.monotonic()
    server.servicer.Translate(request, context)
    assert context.code == grpc.StatusCode.CANCELLED
    assert time.monotonic() - start < 20  # not decoded to its 4,000-token limit
    reg = server.registry
    labels = {"method": "Translate", "code": "CANCELLED"}
    assert reg.get_sample_value("nmt_requests_total", labels) == 1

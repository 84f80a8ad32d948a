"""service.listen against real gRPC servers on the loopback: TLS, mutual TLS, binding
every address of a name, and reflection under v1 and v1alpha."""

from __future__ import annotations

import asyncio
import re
import socket
from concurrent.futures import ThreadPoolExecutor

import grpc
import grpc.aio
import pytest
from cryptography.hazmat.primitives import serialization
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2

from service.listen import ListenError, bind, enable_reflection, listen_hosts, server_credentials
from tests.service.tls_fixtures import TLS_OPTIONS, channel_credentials

V1 = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
V1ALPHA = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
HEALTH = "grpc.health.v1.Health"


# -- helpers ------------------------------------------------------------------------


def _list_request() -> reflection_pb2.ServerReflectionRequest:
    return reflection_pb2.ServerReflectionRequest(list_services="")


def _stream(channel, method: str):
    return channel.stream_stream(
        method,
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )


def _listed(response: reflection_pb2.ServerReflectionResponse) -> set[str]:
    return {service.name for service in response.list_services_response.service}


async def _aio_server(host: str, credentials=None) -> tuple[grpc.aio.Server, int]:
    """A started aio server with health and reflection, bound through ``bind``."""
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    enable_reflection(server, [HEALTH])
    port = bind(server, host, 0, credentials)
    await server.start()
    return server, port


def _sync_server() -> grpc.Server:
    return grpc.server(ThreadPoolExecutor(2), options=[("grpc.so_reuseport", 0)])


def _listening(ip: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.settimeout(2)
        return probe.connect_ex((ip, port)) == 0


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


# -- TLS ----------------------------------------------------------------------------


def test_tls_serves_with_self_signed_certificate(pki):
    async def main():
        credentials = server_credentials(pki / "server.crt", pki / "server.key")
        server, port = await _aio_server("127.0.0.1", credentials)
        try:
            target = f"127.0.0.1:{port}"
            async with grpc.aio.secure_channel(
                target, channel_credentials(pki), TLS_OPTIONS
            ) as channel:
                check = health_pb2_grpc.HealthStub(channel).Check
                reply = await check(health_pb2.HealthCheckRequest(), timeout=10)
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
            # TLS only: a plaintext client does not get through.
            async with grpc.aio.insecure_channel(target) as channel:
                with pytest.raises(grpc.aio.AioRpcError) as error:
                    await health_pb2_grpc.HealthStub(channel).Check(
                        health_pb2.HealthCheckRequest(), timeout=10
                    )
                assert error.value.code() == grpc.StatusCode.UNAVAILABLE
        finally:
            await server.stop(None)

    asyncio.run(main())


def test_tls_file_problems_name_the_flag_and_file(pki, tmp_path):
    cert, key = pki / "server.crt", pki / "server.key"
    with pytest.raises(ListenError, match=r"^--tls-key \S+other\.key does not match the cert"):
        server_credentials(cert, pki / "other.key")
    with pytest.raises(ListenError, match=r"^--tls-key \S+nope\.key: No such file"):
        server_credentials(tmp_path / "nope.crt", tmp_path / "nope.key")
    with pytest.raises(ListenError, match=r"^--tls-cert \S+nope\.crt: No such file"):
        server_credentials(tmp_path / "nope.crt", key)
    (tmp_path / "bad.crt").write_text("not a certificate")
    with pytest.raises(ListenError, match=r"^--tls-cert \S+bad\.crt is not a PEM certificate$"):
        server_credentials(tmp_path / "bad.crt", key)
    truncated = cert.read_text()[:120] + "\n-----END CERTIFICATE-----\n"
    (tmp_path / "cut.crt").write_text(truncated)
    with pytest.raises(ListenError, match=r"^--tls-cert \S+cut\.crt is not a PEM certificate$"):
        server_credentials(tmp_path / "cut.crt", key)
    (tmp_path / "junk.key").write_text(
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
    )
    with pytest.raises(ListenError, match=r"^--tls-key \S+junk\.key is not a PEM private key$"):
        server_credentials(cert, tmp_path / "junk.key")
    with pytest.raises(ListenError, match=r"^--tls-client-ca \S+bad\.crt is not a PEM cert"):
        server_credentials(cert, key, tmp_path / "bad.crt")
    private = serialization.load_pem_private_key(key.read_bytes(), None)
    (tmp_path / "locked.key").write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    with pytest.raises(ListenError, match=r"^--tls-key \S+locked\.key is encrypted"):
        server_credentials(cert, tmp_path / "locked.key")


def test_mutual_tls_admits_only_clients_signed_by_the_client_ca(pki):
    async def check(port: int, client: str | None) -> grpc.StatusCode:
        credentials = channel_credentials(pki, client)
        async with grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials, TLS_OPTIONS) as ch:
            try:
                await health_pb2_grpc.HealthStub(ch).Check(
                    health_pb2.HealthCheckRequest(), timeout=10
                )
            except grpc.aio.AioRpcError as error:
                return error.code()
            return grpc.StatusCode.OK

    async def main():
        credentials = server_credentials(pki / "server.crt", pki / "server.key", pki / "ca.crt")
        server, port = await _aio_server("127.0.0.1", credentials)
        try:
            assert await check(port, "client") == grpc.StatusCode.OK
            assert await check(port, None) == grpc.StatusCode.UNAVAILABLE
            assert await check(port, "rogue") == grpc.StatusCode.UNAVAILABLE
        finally:
            await server.stop(None)

    asyncio.run(main())


# -- binding ------------------------------------------------------------------------


def test_localhost_binds_every_loopback_on_one_port():
    server = _sync_server()
    port = bind(server, "localhost", 0, None)
    server.start()
    try:
        assert port > 0
        assert _listening("127.0.0.1", port)
        if not _ipv6_loopback():
            pytest.skip("this machine has no IPv6 loopback (::1): only 127.0.0.1 checked")
        assert listen_hosts("localhost")[:2] == ["127.0.0.1", "[::1]"]
        assert _listening("::1", port)
    finally:
        server.stop(None)


@pytest.mark.parametrize("held", ["127.0.0.1", "::1"])
def test_an_address_held_elsewhere_is_an_error_not_a_partial_bind(held):
    if ":" in held and not _ipv6_loopback():
        pytest.skip("this machine has no IPv6 loopback (::1)")
    family = socket.AF_INET6 if ":" in held else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as holder:
        holder.bind((held, 0))
        holder.listen()
        port = holder.getsockname()[1]
        shown = f"[{held}]" if ":" in held else held
        with pytest.raises(
            ListenError, match="^" + re.escape(f"could not bind gRPC to {shown}:{port} (port")
        ):
            bind(_sync_server(), "localhost", port, None)


def test_wildcards_and_literals():
    assert listen_hosts("") == listen_hosts("::") == listen_hosts("[::]") == ["[::]"]
    assert listen_hosts("0.0.0.0") == ["0.0.0.0"]
    assert listen_hosts("127.0.0.1") == ["127.0.0.1"]
    assert listen_hosts("[::1]") == ["[::1]"]
    server = _sync_server()
    port = bind(server, "0.0.0.0", 0, None)
    server.start()
    try:
        assert _listening("127.0.0.1", port)
    finally:
        server.stop(None)


def test_a_host_that_does_not_resolve_is_named():
    with pytest.raises(ListenError, match=r"cannot resolve gRPC host 'no-such-host\.invalid'"):
        bind(_sync_server(), "no-such-host.invalid", 0, None)


# -- reflection ---------------------------------------------------------------------


def test_reflection_v1_and_v1alpha_on_an_aio_server():
    async def main():
        server, port = await _aio_server("127.0.0.1")
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                for method in (V1, V1ALPHA):
                    symbols = [
                        HEALTH,
                        "grpc.reflection.v1alpha.ServerReflection",
                        "grpc.reflection.v1.ServerReflection",
                    ]
                    requests = [_list_request()] + [
                        reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol)
                        for symbol in symbols
                    ]
                    call = _stream(channel, method)(iter(requests), timeout=10)
                    replies = [reply async for reply in call]
                    assert _listed(replies[0]) == set(symbols)
                    for reply in replies[1:]:
                        assert reply.WhichOneof("message_response") == "file_descriptor_response"
                    # Still NOT_FOUND for what is not there, not an error of the stream.
                    call = _stream(channel, method)(
                        iter([reflection_pb2.ServerReflectionRequest(file_containing_symbol="x.Y")])
                    )
                    [reply] = [reply async for reply in call]
                    assert reply.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]
        finally:
            await server.stop(None)

    asyncio.run(main())


def test_reflection_v1_and_v1alpha_on_a_sync_server():
    server = _sync_server()
    enable_reflection(server, [HEALTH])
    port = bind(server, "127.0.0.1", 0, None)
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            for method in (V1, V1ALPHA):
                [reply] = _stream(channel, method)(iter([_list_request()]), timeout=10)
                assert HEALTH in _listed(reply)
                assert "grpc.reflection.v1.ServerReflection" in _listed(reply)
    finally:
        server.stop(None)

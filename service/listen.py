"""Where and how the gRPC server listens: TLS credentials, port binding, reflection.

Everything here works on a ``grpc.aio.Server`` and on a sync ``grpc.Server`` alike, and
reports a bad setting as one :class:`ListenError` line that names the flag or address
at fault, because gRPC's own errors for these cases point somewhere else (a certificate
that does not match its key surfaces as a port it "could not bind").
"""

from __future__ import annotations

import errno
import resource
import socket
import ssl
from collections.abc import Sequence
from pathlib import Path

import grpc
import grpc.aio
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import _async as reflection_aio
from grpc_reflection.v1alpha import reflection, reflection_pb2

# Hosts that mean "every interface": gRPC binds them itself, dual-stack for ``[::]``.
WILDCARDS = {"": "[::]", "::": "[::]", "[::]": "[::]", "0.0.0.0": "0.0.0.0"}
REFLECTION_V1ALPHA = reflection.SERVICE_NAME
REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"


class ListenError(ValueError):
    """A TLS file, host or port the server cannot listen with; the message is one line."""


# File descriptors a server needs besides its clients' connections: models, sessions'
# threads, pipes to child processes, the metrics port, logs.
RESERVED_FDS = 256


def raise_open_files_limit() -> int:
    """Raise this process's soft open-files limit to its hard limit (children inherit it)
    and return the soft limit now in force. Many systems start services at a soft limit
    of 1,024, far below what the kernel allows them: each client connection is a file."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # (a container may refuse it): serve within the soft limit
    return soft


def connection_room(wanted: int, open_files: int) -> int:
    """How many connections a port may hold when ``wanted`` is asked (0: no cap) and the
    process may open ``open_files`` files: at most what the limit leaves after
    :data:`RESERVED_FDS` (half of it, under a very low limit), at least 1."""
    room = max(1, open_files - min(RESERVED_FDS, open_files // 2))
    return room if wanted == 0 or wanted > room else wanted


# -- TLS ----------------------------------------------------------------------------


class _Encrypted(Exception):
    """Raised from the password callback: gRPC cannot take a passphrase."""


def _read_pem(flag: str, path: Path, marker: bytes, noun: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ListenError(f"{flag} {path}: {exc.strerror}") from None
    if marker not in data:
        raise ListenError(f"{flag} {path} is not a PEM {noun}")
    return data


def _check_certificates(flag: str, path: Path, data: bytes) -> None:
    """Parse every certificate in ``data``: the marker alone lets a truncated file through."""
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=data.decode("ascii"))
    except (UnicodeDecodeError, ssl.SSLError):
        raise ListenError(f"{flag} {path} is not a PEM certificate") from None


def server_credentials(
    cert: Path, key: Path, client_ca: Path | None = None
) -> grpc.ServerCredentials:
    """TLS credentials from PEM files; with ``client_ca``, mutual TLS.

    With a client CA, a client must present a certificate signed by it or the
    handshake fails. Raises :class:`ListenError` naming the flag and file at fault.
    """
    # Key first: with both files missing, the key is the one reported (as before).
    key_pem = _read_pem("--tls-key", key, b"PRIVATE KEY-----", "private key")
    cert_pem = _read_pem("--tls-cert", cert, b"-----BEGIN CERTIFICATE-----", "certificate")
    _check_certificates("--tls-cert", cert, cert_pem)
    ca_pem = None
    if client_ca is not None:
        ca_pem = _read_pem(
            "--tls-client-ca", client_ca, b"-----BEGIN CERTIFICATE-----", "certificate"
        )
        _check_certificates("--tls-client-ca", client_ca, ca_pem)

    def no_passphrase() -> bytes:
        raise _Encrypted

    # The stdlib's OpenSSL checks that key and certificate belong together; gRPC would
    # only fail later, at bind time, with a misleading "port in use?".
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key, password=no_passphrase)
    except _Encrypted:
        raise ListenError(f"--tls-key {key} is encrypted; gRPC needs it unencrypted") from None
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise ListenError(
                f"--tls-key {key} does not match the certificate in --tls-cert {cert}"
            ) from None
        # The certificate parsed above, so what OpenSSL could not load is the key.
        raise ListenError(f"--tls-key {key} is not a PEM private key") from None
    return grpc.ssl_server_credentials(
        [(key_pem, cert_pem)], root_certificates=ca_pem, require_client_auth=ca_pem is not None
    )


# -- binding ------------------------------------------------------------------------


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


def listen_hosts(host: str) -> list[str]:
    """The hosts :func:`bind` binds for ``host``: one wildcard, or every address the
    name resolves to, IPv6 ones in brackets (``127.0.0.1``, ``[::1]``)."""
    if host in WILDCARDS:
        return [WILDCARDS[host]]
    name = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ListenError(f"cannot resolve gRPC host {host!r}: {reason}") from None
    ips = [str(info[4][0]) for info in infos if info[0] in (socket.AF_INET, socket.AF_INET6)]
    # gRPC's resolver (c-ares, RFC 6761) answers ::1 for "localhost" even where
    # /etc/hosts does not, and its clients dial it: left unbound, another process
    # could take it, and with it every call to localhost:PORT.
    if name.lower() == "localhost":
        ips += ["127.0.0.1"] + (["::1"] if _has_ipv6_loopback() else [])
    return [f"[{ip}]" if ":" in ip else ip for ip in dict.fromkeys(ips)]


def _add_port(server, address: str, credentials: grpc.ServerCredentials | None) -> int:
    # Older grpcio returns 0 for an address it cannot bind, newer raises RuntimeError.
    try:
        if credentials is None:
            return server.add_insecure_port(address)
        return server.add_secure_port(address, credentials)
    except RuntimeError:
        return 0


def _in_use(name: str, port: int, reuse_port: bool) -> bool:
    """Whether ``name:port`` (``[v6]`` in brackets) is taken, probed the way gRPC binds
    (SO_REUSEADDR, and SO_REUSEPORT when the server shares ports): asked first so that a
    port in use is one line of ours, not also an error line of gRPC's C core."""
    ip = name[1:-1] if name.startswith("[") else name
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port and hasattr(socket, "SO_REUSEPORT"):
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            probe.bind((ip, port))
    except OSError as exc:
        return exc.errno == errno.EADDRINUSE
    return False


def bind(
    server,
    host: str,
    port: int,
    credentials: grpc.ServerCredentials | None,
    *,
    reuse_port: bool = False,
) -> int:
    """Bind ``server`` on every address ``host`` resolves to; return the port.

    gRPC alone binds whichever addresses of a name it can and succeeds if any one
    worked, so a server could come up on ::1 alone while another process serves
    127.0.0.1. Here every address must bind or :class:`ListenError` names the one that
    did not. Port 0 picks a free port on the first address and uses it for the rest.
    Earlier addresses may stay bound on failure: discard the server then.
    """
    for name in listen_hosts(host):
        address = f"{name}:{port}"
        if port and _in_use(name, port, reuse_port):
            raise ListenError(f"could not bind gRPC to {address} (port in use)")
        got = _add_port(server, address, credentials)
        if got == 0:
            raise ListenError(f"could not bind gRPC to {address} (port in use?)")
        port = got  # port 0: the other addresses take the port the first one got
    return port


# -- reflection ---------------------------------------------------------------------


def _v1_pool() -> descriptor_pool.DescriptorPool:
    """A private pool holding ``grpc.reflection.v1``: grpcio-reflection ships only
    v1alpha, whose messages are the same on the wire; only the package differs."""
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    old, new = f".{proto.package}.", ".grpc.reflection.v1."
    proto.name, proto.package = "grpc/reflection/v1/reflection.proto", "grpc.reflection.v1"
    proto.options.Clear()
    proto.options.java_package = "io.grpc.reflection.v1"
    proto.options.java_outer_classname = "ServerReflectionProto"
    proto.options.java_multiple_files = True
    proto.options.go_package = "google.golang.org/grpc/reflection/grpc_reflection_v1"
    for message in proto.message_type:
        for message_field in message.field:
            if message_field.HasField("type_name"):  # scalars have none: leave it unset
                message_field.type_name = message_field.type_name.replace(old, new)
    for method in proto.service[0].method:
        method.input_type = method.input_type.replace(old, new)
        method.output_type = method.output_type.replace(old, new)
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(proto.SerializeToString())
    return pool


class _Pools:
    """The default pool, then the v1 pool: so the v1 service listed by ListServices
    can be described too (Postman and ``grpcurl describe`` resolve every listed name)."""

    def __init__(self) -> None:
        self._pools = (descriptor_pool.Default(), _v1_pool())

    def _find(self, method: str, name: str):
        for pool in self._pools:
            try:
                return getattr(pool, method)(name)
            except KeyError:
                pass
        raise KeyError(name)

    def FindFileByName(self, name):  # noqa: N802 - the DescriptorPool interface
        return self._find("FindFileByName", name)

    def FindFileContainingSymbol(self, name):  # noqa: N802
        return self._find("FindFileContainingSymbol", name)

    def FindMessageTypeByName(self, name):  # noqa: N802
        return self._find("FindMessageTypeByName", name)

    def FindExtensionByNumber(self, message, number):  # noqa: N802
        return message.file.pool.FindExtensionByNumber(message, number)

    def FindAllExtensions(self, message):  # noqa: N802
        return message.file.pool.FindAllExtensions(message)


def enable_reflection(server, service_names: Sequence[str]) -> None:
    """Serve reflection as ``grpc.reflection.v1`` and ``v1alpha`` (grpcurl, Postman and
    most tools try v1 first), listing ``service_names`` and both reflection services."""
    names = [*service_names, REFLECTION_V1ALPHA, REFLECTION_V1]
    if isinstance(server, grpc.aio.Server):
        servicer = reflection_aio.ReflectionServicer(names, pool=_Pools())
    else:
        servicer = reflection.ReflectionServicer(names, pool=_Pools())
    methods = {
        "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
            servicer.ServerReflectionInfo,
            request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
            response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
        )
    }
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(name, methods) for name in names[-2:]]
    )

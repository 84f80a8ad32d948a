"""TLS and mutual TLS with the library and ``nmt-translate``, against real servers."""

from __future__ import annotations

import pytest

from nmt_client import ServerUnavailable, Translator
from nmt_client.cli import main


@pytest.fixture(scope="module")
def tls_server(server_factory, pki):
    return server_factory(server={"tls_cert": pki / "server.crt", "tls_key": pki / "server.key"})


@pytest.fixture(scope="module")
def mtls_server(server_factory, pki):
    return server_factory(
        server={
            "tls_cert": pki / "server.crt",
            "tls_key": pki / "server.key",
            "tls_client_ca": pki / "ca.crt",
        }
    )


def refused(target: str, **kwargs) -> ServerUnavailable:
    """The error one call ends in, sent once (fails the test if it succeeds)."""
    with Translator(target, retries=0, timeout=5, **kwargs) as t:
        try:
            t.translate(["A short sentence."])
        except ServerUnavailable as exc:
            return exc
    raise AssertionError("the call succeeded but an error was expected")


def test_tls_with_a_ca_path_or_pem_bytes(tls_server, pki):
    target = f"127.0.0.1:{tls_server.port}"
    with Translator(target, root_certificates=pki / "server.crt") as t:  # TLS implied
        assert t.translate(["A short sentence."])[0].text
        assert t.health() == "SERVING"
    pem = (pki / "server.crt").read_bytes()
    with Translator(target, tls=True, root_certificates=pem, server_name="localhost") as t:
        assert t.translate_one("A short sentence.").text


def test_plaintext_to_a_tls_server_fails_in_one_line(tls_server):
    target = f"127.0.0.1:{tls_server.port}"
    assert str(refused(target)) == (
        f"UNAVAILABLE: cannot connect to {target} (the connection was closed); "
        f"is nmt-serve running on {target}, and does it need TLS (--tls-ca)?"
    )


def test_tls_with_an_unknown_ca_is_refused_with_a_tls_hint(tls_server, pki):
    target = f"127.0.0.1:{tls_server.port}"
    exc = refused(target, root_certificates=pki / "ca.crt")
    assert not exc.connected and exc.tls
    assert str(exc) == (
        f"UNAVAILABLE: cannot connect to {target} (TLS: the server's certificate is not "
        "signed by the CA given); pass the CA that signed it (--tls-ca / root_certificates)"
    )
    wrong_name = refused(target, root_certificates=pki / "server.crt", server_name="example.com")
    assert "not for this name" in str(wrong_name) and "--tls-server-name" in str(wrong_name)


def test_mutual_tls_admits_only_the_client_the_ca_signed(mtls_server, pki):
    target = f"127.0.0.1:{mtls_server.port}"
    ca = pki / "server.crt"
    with Translator(
        target,
        root_certificates=ca,
        certificate_chain=pki / "client.crt",
        private_key=pki / "client.key",
    ) as t:
        assert t.translate(["A short sentence."])[0].text
    for stranger in (None, "rogue"):  # no certificate, or one another CA signed
        cert = (
            {}
            if stranger is None
            else {
                "certificate_chain": pki / f"{stranger}.crt",
                "private_key": pki / f"{stranger}.key",
            }
        )
        exc = refused(target, root_certificates=ca, **cert)
        assert "does it require a client certificate (--tls-cert/--tls-key)" in str(exc)


def test_a_certificate_needs_its_key(pki):
    with pytest.raises(ValueError, match="give both or neither"):
        Translator(certificate_chain=pki / "client.crt")
    with pytest.raises(OSError, match="cannot read the CA certificate"):
        Translator(root_certificates=pki / "missing.crt")


def test_cli_mutual_tls(mtls_server, pki, capsys):
    tls = [
        "--tls-ca",
        str(pki / "server.crt"),
        "--tls-cert",
        str(pki / "client.crt"),
        "--tls-key",
        str(pki / "client.key"),
    ]
    server = ["--server", f"127.0.0.1:{mtls_server.port}"]
    assert main([*server, *tls, "A short sentence."]) == 0
    assert capsys.readouterr().out.strip()
    assert main([*server, *tls, "--list-models"]) == 0
    assert capsys.readouterr().out.startswith("tiny\t1\tfp32\tCPUExecutionProvider\tdefault")
    assert main([*server, *tls[:2], "--retries", "0", "A short sentence."]) == 1  # no client cert
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("nmt-translate: error: UNAVAILABLE")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tls-cert", "c.crt"], "--tls-cert and --tls-key go together: give both or neither"),
        (["--tls-ca", "/nonexistent/ca.crt"], "--tls-ca /nonexistent/ca.crt: no such file"),
    ],
)
def test_cli_tls_argument_errors(argv, message, capsys):
    assert main(["--server", "127.0.0.1:1", *argv, "hello"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"nmt-translate: error: {message}"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tls-ca", "server.key"], "--tls-ca {pki}/server.key holds no PEM certificate"),
        (
            ["--tls-cert", "client.key", "--tls-key", "client.key"],
            "--tls-cert {pki}/client.key holds no PEM certificate",
        ),
        (
            ["--tls-cert", "client.crt", "--tls-key", "client.crt"],
            "--tls-key {pki}/client.crt holds no PEM private key",
        ),
    ],
)
def test_cli_tls_files_of_the_wrong_kind_are_one_line(pki, argv, message, capsys):
    """A key given as the CA made gRPC log TLS errors and blame the server."""
    argv = [str(pki / a) if not a.startswith("--") else a for a in argv]
    assert main(["--server", "127.0.0.1:1", *argv, "hello"]) == 2
    (err,) = capsys.readouterr().err.splitlines()
    assert err.startswith("nmt-translate: error: " + message.format(pki=pki)), err


def test_the_cli_prints_one_line_not_grpcs_handshake_log(server_factory):
    """gRPC's C core logs a failed handshake at INFO on stderr; the commands keep to their
    own line (nmt_client sets GRPC_VERBOSITY for them, before grpc is imported)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    plaintext = server_factory()
    script = Path(sys.executable).parent / "nmt-translate"
    env = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
    argv = [str(script), "--server", f"127.0.0.1:{plaintext.port}", "--tls", "--retries", "0"]
    done = subprocess.run(
        [*argv, "Hello."], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [done.stderr.strip()], done.stderr
    assert done.stderr.startswith("nmt-translate: error: UNAVAILABLE: cannot connect")

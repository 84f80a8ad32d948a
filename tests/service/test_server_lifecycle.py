"""Health states, metrics and shutdown of the real server (in-process and as a process)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_api.nmt.v1 import translator_pb2_grpc as pb_grpc
from service.server import SERVICE_NAME
from tests.service.server_helpers import (
    LOOP_SENTENCE,
    ROOT,
    TIMEOUT,
    blocked_encoder,
    free_port,
    proto_options,
    rpc_error,
    serve_argv,
    spawn_serve,
    stub_for,
    wait_until,
)

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
GRACE = 20.0  # generous: the in-flight request must finish inside it on a busy CI machine
ANNOUNCE = 8.0  # NOT_SERVING while still serving; long enough for a busy CI machine


def _check(channel: grpc.Channel, service: str, timeout: float = 5.0):
    request = health_pb2.HealthCheckRequest(service=service)
    return health_pb2_grpc.HealthStub(channel).Check(request, timeout=timeout).status


def _direct_check(server, service: str):
    """Ask the health servicer itself (the gRPC port refuses calls once it has closed)."""
    request = health_pb2.HealthCheckRequest(service=service)
    return asyncio.run(server.health.Check(request, None)).status


def _long_request(sentence: str, copies: int) -> pb.TranslateRequest:
    return pb.TranslateRequest(
        texts=[sentence] * copies, options=proto_options(beam=5, max_length_ratio=10.0)
    )


# -- health ------------------------------------------------------------------------------------


def test_health_follows_the_lifecycle(server_factory, tiny_bundle, monkeypatch):
    server = server_factory(warm=False, server={"drain_announce": ANNOUNCE})
    channel, stub = stub_for(server.port)
    try:
        for service in ("", SERVICE_NAME):
            assert _check(channel, service) == NOT_SERVING
        exc = rpc_error(lambda: _check(channel, "no.such.Service"))
        assert exc.code() == grpc.StatusCode.NOT_FOUND
        server.warm_up()
        for service in ("", SERVICE_NAME):
            assert _check(channel, service) == SERVING
        # stop() while a request is in flight: for the announcement window health answers
        # NOT_SERVING over the wire while new calls are still served; then the port
        # closes and the request in flight finishes.
        reg, model = server.registry, server.engines["tiny"].bundle.model
        entered, release = blocked_encoder(monkeypatch, model)
        future = stub.Translate.future(
            _long_request(tiny_bundle.sentences[LOOP_SENTENCE], 8), timeout=TIMEOUT
        )
        assert entered.wait(TIMEOUT)
        started = time.monotonic()
        stopper = threading.Thread(target=server.stop, args=(TIMEOUT,))
        stopper.start()
        try:
            assert wait_until(lambda: _check(channel, "") == NOT_SERVING, timeout=5)
            assert _check(channel, SERVICE_NAME) == NOT_SERVING
            assert server.servicer.ready
        finally:
            release.set()
        short = stub.Translate(pb.TranslateRequest(texts=["Hi."]), timeout=TIMEOUT)
        assert len(short.translations) == 1
        assert time.monotonic() - started < ANNOUNCE, "served after the window: make it longer"
        response = future.result()
        assert len(response.translations) == 8
        stopper.join(TIMEOUT)
        assert not stopper.is_alive()
        assert time.monotonic() - started >= ANNOUNCE
        # Stopped: no new calls, health stays NOT_SERVING, engines are idle.
        exc = rpc_error(lambda: stub.Translate(pb.TranslateRequest(texts=["Hi."]), timeout=5))
        assert exc.code() == grpc.StatusCode.UNAVAILABLE
        assert not server.servicer.ready
        assert _direct_check(server, "") == NOT_SERVING
        assert reg.get_sample_value("nmt_live_rows") == 0
        assert reg.get_sample_value("nmt_inflight_requests") == 0
    finally:
        channel.close()


def test_stop_without_grace_is_idempotent(server_factory):
    server = server_factory()
    server.stop(0)
    server.stop(0)  # second call is a no-op
    server.wait()  # returns at once once stopped
    assert _direct_check(server, SERVICE_NAME) == NOT_SERVING


# -- metrics -----------------------------------------------------------------------------------


def test_metrics_count_requests_exactly(server_factory, tiny_bundle):
    server = server_factory()
    reg = server.registry
    ok = {"method": "Translate", "strategy": "greedy", "code": "OK"}
    # Warm-up goes through the engine, not the servicer: no request is counted yet.
    assert reg.get_sample_value("nmt_request_duration_seconds_count", ok) is None
    # Every rejection reason is a series at 0 before the first rejection (for rate()).
    for reason in ("queue_full", "too_many_inflight", "unavailable"):
        assert reg.get_sample_value("nmt_rejected_requests_total", {"reason": reason}) == 0
    assert reg.get_sample_value("nmt_decoder_step_duration_seconds_count") > 0
    channel, stub = stub_for(server.port)
    try:
        n = 5
        for i in range(n):
            stub.Translate(pb.TranslateRequest(texts=[tiny_bundle.sentences[i]]), timeout=TIMEOUT)
        stub.Translate(
            pb.TranslateRequest(texts=["Hello."], options=proto_options(beam=3)), timeout=TIMEOUT
        )
        bad = [
            pb.TranslateRequest(texts=[""]),
            pb.TranslateRequest(texts=["x"], model="missing"),
            pb.TranslateRequest(texts=["x"], options=pb.DecodeOptions(length_penalty=-1)),
        ]
        for request in bad:
            rpc_error(lambda r=request: stub.Translate(r, timeout=TIMEOUT))
        stub.ListModels(pb.ListModelsRequest(), timeout=TIMEOUT)
        list(stub.TranslateStream(pb.TranslateStreamRequest(text="Hello."), timeout=TIMEOUT))
    finally:
        channel.close()

    def value(name, **labels):
        return reg.get_sample_value(name, labels)

    assert value("nmt_request_duration_seconds_count", **ok) == n
    assert value("nmt_request_duration_seconds_count", **{**ok, "strategy": "beam"}) == 1
    assert value("nmt_requests_total", method="Translate", code="OK") == n + 1
    assert value("nmt_requests_total", method="Translate", code="INVALID_ARGUMENT") == len(bad)
    # Options that parsed are labelled by strategy; failures before parsing are "unknown".
    invalid = {"method": "Translate", "code": "INVALID_ARGUMENT"}
    assert value("nmt_request_duration_seconds_count", **invalid, strategy="greedy") == 1
    assert value("nmt_request_duration_seconds_count", **invalid, strategy="unknown") == 2
    assert value("nmt_requests_total", method="ListModels", code="OK") == 1
    assert value("nmt_requests_total", method="TranslateStream", code="OK") == 1
    assert value("nmt_inflight_requests") == 0
    assert value("nmt_live_rows") == 0
    assert value("nmt_queue_depth") == 0
    assert value("nmt_source_tokens_total") > 0
    assert value("nmt_model_info", model="tiny", version="1", provider="CPUExecutionProvider") == 1

    assert server.metrics_port and server.metrics_port > 0
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        assert reply.status == 200
        text = reply.read().decode()
    # The exposition text itself, parsed (label order in the text is the library's choice).
    assert re.search(r"^nmt_request_duration_seconds_count\{.*\} \S+$", text, re.MULTILINE)
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("nmt_request_duration_seconds_count", tuple(sorted(ok.items())))] == n
    inf_bucket = tuple(sorted({**ok, "le": "+Inf"}.items()))
    assert samples[("nmt_request_duration_seconds_bucket", inf_bucket)] == n
    assert "nmt_decoder_step_rows_bucket" in text


def test_metrics_time_the_collectors_passes(server_factory):
    """``nmt_gc_pause_seconds``: a pass of the process's collector is on /metrics, and a
    stopped server observes no more."""
    server = server_factory()
    full = {"process": "nmt-serve", "generation": "2"}

    def passes() -> float:
        return server.registry.get_sample_value("nmt_gc_pause_seconds_count", full) or 0.0

    gc.disable()  # only this test's passes, whatever the server's threads allocate
    try:
        before = passes()
        gc.collect()
        assert passes() == before + 1
        assert server.registry.get_sample_value("nmt_gc_pause_seconds_sum", full) > 0
        server.stop(0)
        gc.collect()
        assert passes() == before + 1
    finally:
        gc.enable()


# -- start-up errors ---------------------------------------------------------------------------


@pytest.fixture
def busy_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_busy_port_is_a_server_error(tiny_bundle, busy_port):
    from service.engine import EngineConfig
    from service.server import ServerConfig, ServerError, create_server
    from service.sessions import RuntimeConfig

    config = ServerConfig(
        model_repository=tiny_bundle.repo,
        host="127.0.0.1",
        port=busy_port,
        metrics_port=-1,
        runtime=RuntimeConfig(providers=("cpu",), intra_op_threads=1),
        engine=EngineConfig(),
    )
    with pytest.raises(ServerError, match="could not bind"):
        create_server(config)


def test_nmt_serve_on_a_busy_port_prints_one_line(tiny_bundle, busy_port):
    """Our error alone: gRPC's C core used to log its own bind failure line before it."""
    argv = serve_argv(tiny_bundle.repo, busy_port)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NMT_LOG_FORMAT": "text"}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 2, done.stderr
    info = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ INFO ")  # start-up log lines
    errors = [line for line in done.stderr.splitlines() if line and not info.match(line)]
    assert errors == [
        f"nmt-serve: error: could not bind gRPC to 127.0.0.1:{busy_port} (port in use)"
    ], done.stderr


def test_with_json_logs_the_start_failure_is_a_json_record_too(tiny_bundle, busy_port):
    """A JSON log pipeline missed the most important line of a failed start (helper-89)."""
    argv = serve_argv(tiny_bundle.repo, busy_port)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NMT_LOG_FORMAT": "json"}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 2, done.stderr
    records = [json.loads(line) for line in done.stderr.splitlines() if line.strip()]
    assert records[-1]["level"] == "CRITICAL"
    assert records[-1]["message"] == (
        f"nmt-serve: error: could not bind gRPC to 127.0.0.1:{busy_port} (port in use)"
    )


def test_a_second_server_on_a_port_in_use_fails_unless_both_reuse_it(server_factory):
    # grpc sets SO_REUSEPORT by default on Linux: without turning it off, a second
    # nmt-serve on the same port started silently and took half the connections.
    from service.server import ServerError

    first = server_factory()
    with pytest.raises(ServerError, match="could not bind gRPC to 127.0.0.1:.*port in use"):
        server_factory(server={"port": first.port})
    shared = server_factory(server={"reuse_port": True})
    second = server_factory(server={"reuse_port": True, "port": shared.port})
    assert second.port == shared.port
    with grpc.insecure_channel(f"127.0.0.1:{shared.port}") as channel:
        reply = pb_grpc.TranslatorStub(channel).Translate(
            pb.TranslateRequest(texts=["Hi."]), timeout=TIMEOUT
        )
    assert len(reply.translations) == 1


def test_cli_start_up_errors(tmp_path, capsys):
    from service import server

    empty = tmp_path / "empty"
    empty.mkdir()
    assert server.main(["--model-repository", str(empty), "--metrics-port", "-1"]) == 2
    assert "no model bundles in" in capsys.readouterr().err
    assert server.main(["--model-repository", str(tmp_path / "missing")]) == 2
    assert "model repository not found" in capsys.readouterr().err
    assert server.main(["--model-repository", str(empty), "--port", "70000"]) == 2
    assert "ports must be in 0..65535" in capsys.readouterr().err
    assert server.main(["--model-repository", str(empty), "--providers", "tpu"]) == 2
    assert "providers must be a non-empty list" in capsys.readouterr().err


def test_cli_unknown_default_model(tiny_bundle, capsys):
    from service import server

    argv = ["--model-repository", str(tiny_bundle.repo), "--default-model", "nope"]
    assert server.main([*argv, "--metrics-port", "-1", "--providers", "cpu"]) == 2
    assert "default model 'nope' not in ['tiny']" in capsys.readouterr().err


# -- SIGTERM drain of the real process ---------------------------------------------------------


@pytest.fixture
def server_process(tiny_bundle, tmp_path):
    port = free_port()
    log = open(tmp_path / "server.log", "w+")  # noqa: SIM115 - closed below
    flags = ("--shutdown-grace", str(GRACE))
    proc = spawn_serve(tiny_bundle.repo, port, log, *flags, preexec_fn=lambda: os.nice(19))
    try:
        yield proc, port, log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        log.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_sigterm_drains_in_flight_requests(server_process, tiny_bundle, sig):
    """(SIGHUP, which killed the server undrained and unlogged, drains the same way:
    helper-89.)"""
    proc, port, log = server_process
    channel, stub = stub_for(port)
    try:

        def serving() -> bool:
            assert proc.poll() is None, "the server process exited during start-up"
            try:
                return _check(channel, SERVICE_NAME, timeout=1) == SERVING
            except grpc.RpcError:
                return False

        assert wait_until(serving, timeout=180, every=0.2), "the server never became SERVING"
        # A stream proves the request is mid-decode (its first message is out) before SIGTERM.
        request = pb.TranslateStreamRequest(
            text=tiny_bundle.sentences[LOOP_SENTENCE],
            options=proto_options(beam=5, max_length_ratio=10.0),
        )
        unary = stub.Translate.future(
            _long_request(tiny_bundle.sentences[LOOP_SENTENCE], 4), timeout=TIMEOUT
        )
        stream = stub.TranslateStream(request, timeout=TIMEOUT)
        first = next(stream)
        assert not first.final, "the request finished before SIGTERM: make it longer"
        proc.send_signal(sig)
        rest = list(stream)
        assert rest and rest[-1].final
        assert rest[-1].text.startswith(first.text)
        assert len(rest[-1].translation.hypotheses[0].tokens) >= 100
        assert len(unary.result().translations) == 4
        assert proc.wait(timeout=GRACE + 10) == 0
    finally:
        channel.close()
    log.seek(0)
    output = log.read()
    expected = f"still serving for 2.0 s, then draining: calls get {GRACE:.1f} s in all"
    assert expected in output, output[-2000:]
    # the start-up heap left out of the collector's full passes (service/heap.py)
    frozen = re.search(r"nmt-serve: (\d+) start-up objects frozen", output)
    assert frozen and int(frozen.group(1)) > 1000, output[-2000:]


def test_cli_flags_and_environment_build_the_config(monkeypatch, tmp_path):
    from service.server import parse_args

    monkeypatch.setenv("NMT_MAX_QUEUE", "7")
    monkeypatch.setenv("NMT_METRICS_HOST", "127.0.0.1")
    monkeypatch.setenv("NMT_IO_BINDING", "on")
    monkeypatch.setenv("NMT_ENCODER_THREAD", "off")
    monkeypatch.setenv("NMT_GRAPH_OPTIMIZATION", "basic")
    monkeypatch.setenv("NMT_DRAIN_ANNOUNCE", "0.5")
    config = parse_args(
        ["--model-repository", str(tmp_path), "--port", "6001", "--providers", "cpu"]
    )
    assert config.model_repository == tmp_path
    assert config.port == 6001
    assert config.metrics_host == "127.0.0.1"
    assert config.engine.max_queue == 7
    assert config.runtime.providers == ("cpu",)
    assert config.runtime.io_binding == "on"
    assert config.engine.background_encoder is False
    assert parse_args(["--encoder-thread", "on"]).engine.background_encoder is True
    assert parse_args(["--metrics-host", "0.0.0.0"]).metrics_host == "0.0.0.0"
    assert parse_args(["--io-binding", "off"]).runtime.io_binding == "off"
    assert config.runtime.optimization == "basic"
    assert config.drain_announce == 0.5
    assert parse_args(["--drain-announce", "0"]).drain_announce == 0
    with pytest.raises(ValueError, match="drain announce must be >= 0 seconds"):
        parse_args(["--drain-announce", "-1"])
    assert parse_args(["--graph-optimization", "disable"]).runtime.optimization == "disable"


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("NMT_REQUIRE_GPU", "TRUE", None),
        ("NMT_REQUIRE_GPU", "maybe", "NMT_REQUIRE_GPU='maybe': use one of 1, true, yes, on"),
        ("NMT_PORT", "abc", "NMT_PORT='abc' is not an integer"),
        ("NMT_SHUTDOWN_GRACE", "soon", "NMT_SHUTDOWN_GRACE='soon' is not a number"),
        ("NMT_ENCODER_THREAD", "bogus", "NMT_ENCODER_THREAD='bogus': --encoder-thread must be"),
        ("NMT_IO_BINDING", "sometimes", "NMT_IO_BINDING='sometimes': --io-binding must be one of"),
    ],
)
def test_environment_variables_are_checked_like_flags(monkeypatch, variable, value, message):
    # A misspelt NMT_REQUIRE_GPU used to leave the check off silently, and a value from
    # the environment skipped argparse's choices.
    from service.server import parse_args

    monkeypatch.setenv(variable, value)
    if message is None:
        assert parse_args([]).runtime.require_gpu is True  # case does not matter
        return
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_args([])


def test_cli_metrics_port_in_use_is_one_line(tiny_bundle, busy_port, capsys):
    from service import server

    argv = ["--model-repository", str(tiny_bundle.repo), "--providers", "cpu", "--port", "0"]
    assert (
        server.main([*argv, "--metrics-host", "127.0.0.1", "--metrics-port", str(busy_port)]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"nmt-serve: error: could not serve metrics on 127.0.0.1:{busy_port}")
    assert "choose another --metrics-port" in err
    assert "Traceback" not in err and len(err.splitlines()) == 1
    # a host that is not this machine's names the host, not the port (helper-81's audit)
    for host in ("bogus.invalid", "192.0.2.1"):
        assert server.main([*argv, "--metrics-host", host, "--metrics-port", "0"]) == 2
        err = capsys.readouterr().err.strip()
        assert "choose another --metrics-host, or --metrics-port -1" in err, err
        assert len(err.splitlines()) == 1


def test_cli_tls_files_are_checked(tiny_bundle, tmp_path, capsys, monkeypatch):
    """Before any model loads (they were reported only once every model had: helper-89)."""
    from service import server

    def no_loading(*args, **kwargs):
        raise AssertionError("models loaded before the TLS files were checked")

    monkeypatch.setattr(server, "TranslationServer", no_loading)
    argv = ["--model-repository", str(tiny_bundle.repo), "--providers", "cpu", "--port", "0"]
    argv += ["--metrics-port", "-1"]
    missing = ["--tls-cert", str(tmp_path / "nope.crt"), "--tls-key", str(tmp_path / "nope.key")]
    assert server.main([*argv, *missing]) == 2
    assert "--tls-key " in capsys.readouterr().err
    (tmp_path / "bad.crt").write_text("not a certificate")
    (tmp_path / "ok.key").write_text(
        "-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----\n"
    )
    bad = ["--tls-cert", str(tmp_path / "bad.crt"), "--tls-key", str(tmp_path / "ok.key")]
    assert server.main([*argv, *bad]) == 2
    assert "bad.crt is not a PEM certificate" in capsys.readouterr().err


@pytest.mark.parametrize("engine_process", ["off", "on"])
def test_the_stop_budget_counts_each_child_process(server_factory, engine_process):
    """nmt-serve's shutdown timer allows the grace, the overrun, and one child's stop
    (its margin and joins before SIGKILL) per engine process and front end, one after the
    other: two wedged engine processes once ran past a flat 30 s and left one running."""
    from service.server import CHILD_STOP_SECONDS, SHUTDOWN_OVERRUN_SECONDS

    server = server_factory(warm=False, start=False, server={"engine_process": engine_process})
    children = 1 if engine_process == "on" else 0
    assert server.stop_budget(10.0) == 10.0 + SHUTDOWN_OVERRUN_SECONDS + children * (
        CHILD_STOP_SECONDS
    )


def test_a_stuck_shutdown_prints_every_threads_stack_and_exits_1():
    """nmt-serve arms this before it drains: a hang anywhere in ``stop`` (or in the
    interpreter's exit) ends with stacks in the log instead of a process that never goes."""
    code = (
        "import threading, time\n"
        "from service.server import exit_if_stuck\n"
        "threading.Thread(target=time.sleep, args=(60,), name='stuck-join').start()\n"
        "exit_if_stuck(0.5)\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=50
    )
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - started < 40
    assert "Timeout (0:00:00.500000)!" in done.stderr, done.stderr
    # both threads' stacks, the sleeping main thread's innermost frame at its line
    assert done.stderr.count("(most recent call first)") == 2, done.stderr
    assert 'File "<string>", line 5' in done.stderr, done.stderr


def test_sigterm_while_loading_ends_the_start_logged(tmp_path, monkeypatch):
    """A SIGTERM before the models are loaded (a rollout that changed its mind) ends the
    start with exit 0 and a log line, where it used to kill the process unlogged (143);
    a near-miss NMT_ variable is warned about first."""
    from tests.committed import ROOT as REPO_ROOT
    from tests.service.server_helpers import free_port

    monkeypatch.setenv("NMT_MAX_QUEU", "3")
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = spawn_serve(REPO_ROOT / "model_repository", free_port(), out)
    try:
        assert wait_until(lambda: "ONNX Runtime sessions" in log.read_text(), timeout=60)
        proc.send_signal(signal.SIGTERM)  # the second model is still loading
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    text = log.read_text()
    assert "stopped before serving (a signal while loading)" in text
    assert "NMT_MAX_QUEU is not an nmt-serve variable (ignored): NMT_MAX_QUEUE?" in text
    assert "SERVING" not in text and "Traceback" not in text


def test_plaintext_probes_of_the_tls_port_do_not_fill_the_log(tiny_bundle, tmp_path, pki):
    """gRPC's C core logs every failed TLS handshake at INFO: nmt-serve (the command, as
    the image runs it) keeps it to errors unless GRPC_VERBOSITY says otherwise."""
    port = free_port()
    script = Path(sys.executable).parent / "nmt-serve"
    argv = [str(script), *serve_argv(tiny_bundle.repo, port)[3:]]
    argv += ["--tls-cert", str(pki / "server.crt"), "--tls-key", str(pki / "server.key")]
    env = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
    path = tmp_path / "server.log"
    with open(path, "w+") as log:
        proc = subprocess.Popen(
            argv, cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}, stdout=log, stderr=log
        )
        try:
            assert wait_until(lambda: "SERVING" in path.read_text(), timeout=60, every=0.2), (
                path.read_text()
            )
            for _ in range(50):
                with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
                    sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
                    sock.settimeout(TIMEOUT)
                    sock.recv(100)  # the server ends the handshake
        finally:
            proc.terminate()
            proc.wait(30)
    text = path.read_text()
    assert "Handshake failed" not in text
    assert len(text.splitlines()) < 30, text[-2000:]

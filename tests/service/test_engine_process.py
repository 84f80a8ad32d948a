"""``--engine-process on``: each model's engine in a child process (service/remote.py).

The same requests give the same answers as the in-process engine; cancels, deadlines,
streams, refusals, drains and metrics work across the pipe; and a child that dies is
noticed at once: calls in flight fail, health turns NOT_SERVING, ``nmt-serve`` exits 1.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from nmt_api import RETRY_HINT, SERVICE_NAME
from nmt_api.nmt.v1 import translator_pb2 as pb
from service.remote import RemoteEngine
from service.server import CHILD_STOP_SECONDS, SHUTDOWN_OVERRUN_SECONDS
from service.sessions import HOST_GREEDY_STEPS
from tests.service.server_fixtures import TINY_MODEL
from tests.service.server_helpers import (
    TIMEOUT,
    free_port,
    proto_options,
    rpc_error,
    settled,
    spawn_serve,
    stub_for,
    wait_until,
)

PARITY_SENTENCES = (1, 2, 5, 6, 7, 9, 13)
STREAM_SENTENCES = (1, 5, 9)
PROMPT = 5.0  # seconds: "at once" for a dead engine process, on a loaded 2-core machine

# -- run in the child process through RemoteEngine.call ----------------------------------

_gate: threading.Event | None = None


def _hold_steps(engine) -> None:
    """Decoder steps wait until _release_steps (the scheduler blocks inside a step)."""
    global _gate
    model, gate = engine.bundle.model, threading.Event()
    real = type(model).step
    _gate = gate

    def step(*args, **kwargs):
        assert gate.wait(TIMEOUT), "the test never released the decoder"
        return real(model, *args, **kwargs)

    model.step = step


def _release_steps(engine) -> None:
    if _gate is not None:
        _gate.set()
    vars(engine.bundle.model).pop("step", None)


def _in_flight(engine) -> tuple[int, int, int]:
    """(queued requests, sentences decoding, rows reserved) in the child's engine."""
    return len(engine._queue), len(engine._loop.active), engine._rows_reserved


def _scheduler_bug() -> bool:
    raise RuntimeError("injected scheduler bug")


def _break_scheduler(engine) -> None:
    """The scheduler's next iteration raises: the child's engine dies, the process lives."""
    engine._admit_now = _scheduler_bug


def _requests(engine) -> tuple[int, int]:
    """(requests queued or decoding, those cancelled) in the child's engine."""
    jobs = set(engine._queue) | {a.handle[0] for a in engine._loop.active}
    return len(jobs), sum(job.cancelled for job in jobs)


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def servers(server_factory):
    """The in-process engine and the engine process, same model and limits."""
    limits = {"max_beam_size": 8, "max_n_best": 8}
    local = server_factory(**limits)  # --engine-process auto: in this process on the CPU
    remote = server_factory(server={"engine_process": "on"}, **limits)
    assert isinstance(remote.engines[TINY_MODEL], RemoteEngine)
    assert not isinstance(local.engines[TINY_MODEL], RemoteEngine)
    return local, remote


@pytest.fixture(scope="module")
def stubs(servers):
    channels = [stub_for(server.port) for server in servers]
    yield [stub for _, stub in channels]
    for channel, _ in channels:
        channel.close()


@pytest.fixture
def remote(servers):
    engine = servers[1].engines[TINY_MODEL]
    yield servers[1], engine
    engine.call(_release_steps)  # whatever a test left held


def _translate(stub, texts, options, timeout=TIMEOUT):
    return stub.Translate(pb.TranslateRequest(texts=texts, options=options), timeout=timeout)


def _health(port: int) -> int:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        request = health_pb2.HealthCheckRequest(service=SERVICE_NAME)
        return health_pb2_grpc.HealthStub(channel).Check(request, timeout=5).status
    finally:
        channel.close()


def _idle(engine) -> bool:
    return engine.call(_in_flight) == (0, 0, 0)


# -- the same answers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        proto_options(beam=1),
        proto_options(beam=1, return_attention=True, return_scores=True),
        proto_options(beam=5, n_best=3, return_scores=True),
        proto_options(beam=4, n_best=2, return_attention=True, return_scores=True),
    ],
    ids=["greedy", "greedy-attention", "beam5-nbest3", "beam4-attention"],
)
def test_translations_match_the_in_process_engine(stubs, tiny_bundle, options):
    texts = [tiny_bundle.sentences[i] for i in PARITY_SENTENCES]
    local, remote = (_translate(stub, texts, options) for stub in stubs)
    assert len(remote.translations) == len(texts)
    assert (remote.model, remote.model_version) == (local.model, local.model_version)
    for got, want in zip(remote.translations, local.translations, strict=True):
        assert got.source_tokens == want.source_tokens
        assert [(h.text, list(h.tokens)) for h in got.hypotheses] == [
            (h.text, list(h.tokens)) for h in want.hypotheses
        ]
        for g, w in zip(got.hypotheses, want.hypotheses, strict=True):
            assert g.score == pytest.approx(w.score, abs=1e-5)
            assert g.log_prob == pytest.approx(w.log_prob, abs=1e-5)
            assert (g.attention.rows, g.attention.cols) == (w.attention.rows, w.attention.cols)
            assert list(g.attention.values) == pytest.approx(list(w.attention.values), abs=1e-5)
            assert list(g.attention.target_tokens) == list(w.attention.target_tokens)
    assert remote.timing.total_ms > 0 and remote.timing.decode_ms > 0


@pytest.mark.parametrize("beam", [1, 3])
def test_streams_match_the_in_process_engine(stubs, tiny_bundle, beam):
    for i in STREAM_SENTENCES:
        request = pb.TranslateStreamRequest(
            text=tiny_bundle.sentences[i], options=proto_options(beam=beam, return_scores=True)
        )
        local, remote = (list(stub.TranslateStream(request, timeout=TIMEOUT)) for stub in stubs)
        assert [(m.text, m.delta, m.final) for m in remote] == [
            (m.text, m.delta, m.final) for m in local
        ]
        got, want = remote[-1].translation.hypotheses[0], local[-1].translation.hypotheses[0]
        # a partial message before the final one, unless one call decoded it all
        one_call = beam == 1 and len(got.tokens) < HOST_GREEDY_STEPS
        assert remote[-1].final and (len(remote) >= 2 or one_call)
        assert (got.text, list(got.tokens)) == (want.text, list(want.tokens))
        assert got.score == pytest.approx(want.score, abs=1e-5)


def test_list_models_is_the_same(stubs):
    local, remote = (stub.ListModels(pb.ListModelsRequest(), timeout=TIMEOUT) for stub in stubs)
    assert remote == local


def test_invalid_requests_are_refused_in_the_server_process(stubs, tiny_bundle):
    """Tokenisation and limits are checked before anything crosses to the child."""
    options = proto_options(beam=1)
    for stub in stubs:
        err = rpc_error(lambda stub=stub: _translate(stub, ["  "], options))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    errors = [rpc_error(lambda s=s: _translate(s, ["x " * 5000], options)) for s in stubs]
    assert errors[0].details() == errors[1].details()


# -- cancel, deadline, refusals ---------------------------------------------------------------


def test_client_cancel_reaches_the_child(remote, stubs, tiny_bundle):
    server, engine = remote
    engine.call(_hold_steps)
    call = stubs[1].Translate.future(
        pb.TranslateRequest(texts=tiny_bundle.sentences[:3], options=proto_options(beam=4)),
        timeout=TIMEOUT,
    )
    assert wait_until(lambda: engine.call(_in_flight)[1] > 0, TIMEOUT), "never admitted"
    call.cancel()
    assert wait_until(lambda: engine.call(_requests) == (1, 1), TIMEOUT), "no cancel arrived"
    engine.call(_release_steps)
    assert wait_until(lambda: _idle(engine), TIMEOUT), engine.call(_in_flight)
    assert call.cancelled()
    cancelled = {"method": "Translate", "code": "CANCELLED"}
    assert wait_until(
        lambda: (server.registry.get_sample_value("nmt_requests_total", cancelled) or 0) >= 1
    )


def test_deadline_passes_while_the_child_decodes(remote, stubs, tiny_bundle):
    server, engine = remote
    engine.call(_hold_steps)
    start = time.monotonic()
    err = rpc_error(lambda: _translate(stubs[1], tiny_bundle.sentences[:2], proto_options(), 0.5))
    assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - start < PROMPT
    engine.call(_release_steps)
    # The handler cancelled its job when the deadline ended the call: the child drops it.
    assert wait_until(lambda: _idle(engine), TIMEOUT), engine.call(_in_flight)


def test_engine_refusal_keeps_its_status_and_message(server_factory, tiny_bundle):
    """Queue full in the child: RESOURCE_EXHAUSTED with the hint once, counted there."""
    server = server_factory(server={"engine_process": "on"}, max_queue=1)
    engine = server.engines[TINY_MODEL]
    channel, stub = stub_for(server.port)
    try:
        engine.call(_hold_steps)
        text = [tiny_bundle.sentences[1]]
        decoding = stub.Translate.future(pb.TranslateRequest(texts=text), timeout=TIMEOUT)
        assert wait_until(lambda: engine.call(_in_flight)[1] == 1, TIMEOUT)
        queued = stub.Translate.future(pb.TranslateRequest(texts=text), timeout=TIMEOUT)
        assert wait_until(lambda: engine.call(_in_flight)[0] == 1, TIMEOUT)
        err = rpc_error(lambda: _translate(stub, text, proto_options()))
        assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert err.details().count(RETRY_HINT) == 1, err.details()
        assert "request queue is full (1 waiting)" in err.details()
        engine.call(_release_steps)
        assert len(decoding.result().translations) == 1
        assert len(queued.result().translations) == 1
        full = {"reason": "queue_full"}
        assert wait_until(
            lambda: server.registry.get_sample_value("nmt_rejected_requests_total", full) == 1
        )
    finally:
        channel.close()


# -- metrics -----------------------------------------------------------------------------------


def _value(server, name: str, labels: dict | None = None) -> float:
    return server.registry.get_sample_value(name, labels or {}) or 0.0


def test_engine_metrics_come_from_the_child(remote, stubs, tiny_bundle):
    server, engine = remote
    names = (
        "nmt_decoder_step_duration_seconds_count",
        "nmt_decoder_step_rows_count",
        "nmt_generated_tokens_total",
        "nmt_source_tokens_total",
        "nmt_encoder_duration_seconds_count",
        "nmt_queue_wait_seconds_count",
        "nmt_request_target_tokens_count",
    )

    # The heartbeat forwards the child's samples: read them once the last calls' are in.
    def read() -> dict[str, float]:
        return {name: _value(server, name) for name in names}

    before = settled(read)
    texts = [tiny_bundle.sentences[i] for i in PARITY_SENTENCES]
    _translate(stubs[1], texts, proto_options(beam=1))
    assert wait_until(lambda: all(v > before[k] for k, v in read().items()), 10), read()
    after = settled(read)
    assert after[names[2]] - before[names[2]] >= len(texts)
    assert after[names[1]] - before[names[1]] == after[names[0]] - before[names[0]]  # steps
    assert after[names[6]] - before[names[6]] == 1
    # The parent's own metrics are there too, and every family once (a valid exposition).
    assert _value(server, "nmt_requests_total", {"method": "Translate", "code": "OK"}) >= 1
    assert _value(server, "nmt_queue_depth") == 0 and _value(server, "nmt_live_rows") == 0
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    families = [f.name for f in text_string_to_metric_families(text)]
    assert len(families) == len(set(families))
    assert {"nmt_decoder_step_duration_seconds", "nmt_queue_depth", "nmt_requests"} <= set(families)
    # The engine process's own CPU and memory, apart from the server process's.
    model = {"model": TINY_MODEL}
    assert _value(server, "nmt_engine_process_cpu_seconds_total", model) > 0
    assert _value(server, "nmt_engine_process_resident_memory_bytes", model) > 10e6
    # The child's collector passes, under its own process name.
    passes = [
        _value(server, "nmt_gc_pause_seconds_count", {"process": process, "generation": str(g)})
        for process in (f"nmt-engine-{TINY_MODEL}", "nmt-serve")
        for g in range(3)
    ]
    assert sum(passes[:3]) > 0 and sum(passes[3:]) > 0, passes


# -- drain and crash -------------------------------------------------------------------------


def test_stop_drains_the_child(server_factory, tiny_bundle):
    server = server_factory(server={"engine_process": "on", "drain_announce": 0.2})
    engine = server.engines[TINY_MODEL]
    channel, stub = stub_for(server.port)
    try:
        engine.call(_hold_steps)
        call = stub.Translate.future(
            pb.TranslateRequest(texts=tiny_bundle.sentences[:2], options=proto_options(beam=3)),
            timeout=TIMEOUT,
        )
        assert wait_until(lambda: engine.call(_in_flight)[1] > 0, TIMEOUT)
        stopper = threading.Thread(target=server.stop, args=(10.0,))
        stopper.start()
        time.sleep(0.5)
        engine.call(_release_steps)
        assert len(call.result(TIMEOUT).translations) == 2
        stopper.join(TIMEOUT)
        assert not stopper.is_alive()
        assert engine.process.exitcode == 0
        assert engine.health() is None and not server.failed.is_set()
    finally:
        channel.close()


@pytest.mark.parametrize("busy", [True, False], ids=["decoding", "idle"])
def test_killed_engine_process_fails_calls_and_health(server_factory, tiny_bundle, busy):
    server = server_factory(server={"engine_process": "on"})
    engine = server.engines[TINY_MODEL]
    assert _health(server.port) == health_pb2.HealthCheckResponse.SERVING
    channel, stub = stub_for(server.port)
    try:
        calls, stream_errors = [], []
        if busy:
            engine.call(_hold_steps)
            calls = [
                stub.Translate.future(
                    pb.TranslateRequest(texts=tiny_bundle.sentences[:2]), timeout=TIMEOUT
                )
                for _ in range(3)
            ]
            request = pb.TranslateStreamRequest(text=tiny_bundle.sentences[1])

            def stream() -> None:
                try:
                    list(stub.TranslateStream(request, timeout=TIMEOUT))
                except grpc.RpcError as exc:
                    stream_errors.append(exc)

            streamer = threading.Thread(target=stream)
            streamer.start()
            assert wait_until(lambda: engine.call(_requests)[0] == 4, TIMEOUT)
        killed = time.monotonic()
        os.kill(engine.pid, signal.SIGKILL)
        for call in calls:
            err = call.exception(PROMPT)
            assert err is not None and err.code() == grpc.StatusCode.INTERNAL, err
            assert "the engine process exited (killed by SIGKILL)" in err.details()
        if busy:
            streamer.join(PROMPT)
            assert [e.code() for e in stream_errors] == [grpc.StatusCode.INTERNAL]
        assert time.monotonic() - killed < PROMPT
        assert server.failed.wait(PROMPT), "the watchdog never noticed"
        reason = "the engine process exited (killed by SIGKILL)"
        assert server.failure == f"model {TINY_MODEL}: {reason}"
        assert _health(server.port) == health_pb2.HealthCheckResponse.NOT_SERVING
        err = rpc_error(lambda: _translate(stub, tiny_bundle.sentences[:1], proto_options()))
        assert err.code() == grpc.StatusCode.UNAVAILABLE
        # Its gauges drop to 0 with it; its counters keep what they had.
        assert _value(server, "nmt_live_rows") == 0 and _value(server, "nmt_queue_depth") == 0
        sample = server.registry.get_sample_value
        assert sample("nmt_engine_process_cpu_seconds_total", {"model": TINY_MODEL}) is None
    finally:
        channel.close()


def test_dead_scheduler_in_the_child_is_reported(server_factory, tiny_bundle):
    """The child lives on but its engine is dead: its heartbeat says so."""
    server = server_factory(server={"engine_process": "on"})
    engine = server.engines[TINY_MODEL]
    channel, stub = stub_for(server.port)
    try:
        engine.call(_break_scheduler)
        err = rpc_error(lambda: _translate(stub, tiny_bundle.sentences[:1], proto_options()))
        assert err.code() == grpc.StatusCode.INTERNAL
        assert err.details().startswith("internal error (RuntimeError) in the translation engine")
        assert server.failed.wait(PROMPT), "the watchdog never noticed"
        reason = "the scheduler thread failed: RuntimeError: injected scheduler bug"
        assert server.failure == f"model {TINY_MODEL}: {reason}"
        assert engine.process.is_alive()
    finally:
        channel.close()


# -- nmt-serve ----------------------------------------------------------------------------


def _engine_processes(pid: int) -> list[int]:
    """The spawned engine processes of ``pid`` (not multiprocessing's resource tracker)."""
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        children = [int(p) for p in fh.read().split()]
    out = []
    for child in children:
        with open(f"/proc/{child}/cmdline", "rb") as fh:
            if b"spawn_main" in fh.read():
                out.append(child)
    return out


@pytest.fixture
def serve(tiny_bundle, tmp_path):
    """``nmt-serve --engine-process on`` in a session of its own; yields (proc, port, log)."""
    port = free_port()
    log = open(tmp_path / "server.log", "w+")  # noqa: SIM115 - closed below
    flags = ["--engine-process", "on", "--shutdown-grace", "20", "--drain-announce", "0.5"]
    proc = spawn_serve(tiny_bundle.repo, port, log, *flags, start_new_session=True)
    try:

        def serving() -> bool:
            assert proc.poll() is None, "nmt-serve exited during start-up"
            try:
                return _health(port) == health_pb2.HealthCheckResponse.SERVING
            except grpc.RpcError:
                return False

        assert wait_until(serving, timeout=180, every=0.2), "nmt-serve never became SERVING"
        yield proc, port, log
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


def _output(log) -> str:
    log.seek(0)
    return log.read()


def test_nmt_serve_exits_1_when_its_engine_process_dies(serve):
    proc, _, log = serve
    (child,) = _engine_processes(proc.pid)
    os.kill(child, signal.SIGKILL)
    assert proc.wait(timeout=30) == 1, _output(log)[-3000:]
    output = _output(log)
    assert "exiting for a restart: model tiny: the engine process exited (killed by SIGKILL)" in (
        output
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_nmt_serve_drains_when_the_whole_group_gets_sigterm(serve, tiny_bundle, sig):
    """systemd and Ctrl-C signal the whole process group: the child ignores it and the
    server drains it, finishing the call in flight. (So does a closed terminal's SIGHUP,
    which killed the child mid-call: helper-90.)"""
    proc, port, log = serve
    channel, stub = stub_for(port)
    try:
        request = pb.TranslateStreamRequest(
            text=tiny_bundle.sentences[0], options=proto_options(beam=5, max_length_ratio=10.0)
        )
        stream = stub.TranslateStream(request, timeout=TIMEOUT)
        first = next(stream)
        assert not first.final, "the request finished before SIGTERM: make it longer"
        os.killpg(proc.pid, sig)
        rest = list(stream)
        assert rest and rest[-1].final
        # past its stop budget (grace 20 s, one engine process) nmt-serve dumps its
        # threads' stacks and exits 1 (service.server.exit_if_stuck): wait longer, to see
        # them in the log
        wait = 20 + SHUTDOWN_OVERRUN_SECONDS + CHILD_STOP_SECONDS + 15
        try:
            code = proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:  # say what the server was doing, not only that
            pytest.fail(f"nmt-serve still running {wait} s after SIGTERM:\n{_output(log)[-3000:]}")
        assert code == 0, _output(log)[-3000:]
    finally:
        channel.close()


# ---------------------------------------------------------------- the child's outbox


class _PicklingWire:
    """Records what the child would write: pickled, as the real pipe does."""

    def __init__(self) -> None:
        import pickle

        self.sent: list[tuple] = []
        self._dumps = pickle.dumps

    def send(self, message: tuple) -> bool:
        self._dumps(message)  # raises as Connection.send would, before writing
        self.sent.append(message)
        return True

    def send_bytes(self, data: bytes) -> bool:
        import pickle

        self.sent.append(pickle.loads(data))
        return True


def _drain(messages: list[tuple]) -> list[tuple]:
    from service.enginechild import EngineChild

    child = EngineChild([_PicklingWire()], engine=None)
    for message in [*messages, None]:
        child._send(message) if message is not None else child._outbox.put(None)
    child._sender()
    return child.wires[0].sent


def test_messages_queued_together_go_as_one_batch_in_order():
    messages = [("prefix", 1, (5,), False), ("done", 1, [[]], (0.0, 0.0, 0.0)), ("stopped",)]
    assert _drain(messages) == [("batch", tuple(messages))]
    assert _drain(messages[:1]) == messages[:1]


def test_messages_go_back_on_the_link_they_are_for_in_order():
    """With --frontends the child serves several links: each gets its own messages, in
    the order they were queued, one batch per link."""
    from service.enginechild import EngineChild

    child = EngineChild([_PicklingWire(), _PicklingWire()], engine=None)
    queued = [(0, ("prefix", 1, (5,), False)), (1, ("done", 1, [[]], (0.0, 0.0, 0.0)))]
    queued += [(0, ("done", 1, [[]], (0.0, 0.0, 0.0))), (1, ("error", 2, "Overloaded", "full"))]
    for link, message in queued:
        child._send(message, link)
    child._outbox.put(None)
    child._sender()
    for link in (0, 1):
        mine = tuple(m for n, m in queued if n == link)
        assert child.wires[link].sent == [("batch", mine)]


def test_a_result_that_does_not_pickle_fails_its_job_not_the_batch():
    good = ("done", 1, [[]], (0.0, 0.0, 0.0))
    bad = ("done", 2, [[lambda: None]], (0.0, 0.0, 0.0))
    call = ("called", 7, True, lambda: None)
    sent = _drain([good, bad, call])
    assert sent[0] == good
    assert sent[1][:3] == ("error", 2, "")  # not a domain error: INTERNAL in the parent
    assert sent[2][:3] == ("called", 7, False) and isinstance(sent[2][3], RuntimeError)


class _Idle:
    """An engine as the child's answers see it: idle or not."""

    def __init__(self, idle: bool) -> None:
        self.idle = idle


def _answering(idle: bool):
    from service.enginechild import EngineChild

    return EngineChild([_PicklingWire()], engine=_Idle(idle))


DONE = ("done", 1, [[]], (0.0, 0.0, 0.0))


def test_an_idle_engines_answer_is_written_at_once():
    """One client: nothing to overlap, so the answer does not wait for the sender."""
    child = _answering(idle=True)
    child._answer(DONE, 0)
    assert child.wires[0].sent == [DONE]
    assert child._outbox.empty() and child._pending == 0


@pytest.mark.parametrize("case", ["busy", "queued before it", "large", "does not pickle"])
def test_an_answer_goes_through_the_sender_otherwise(case):
    """A busy engine (the scheduler goes back to ONNX Runtime while the sender writes),
    a message queued before it (its order), a long reply (the scheduler must not wait for
    the server process to read it) or one that does not pickle (the sender fails its job)."""
    from service.enginechild import DIRECT_BYTES

    child = _answering(idle=case != "busy")
    before = ("prefix", 1, (5,), False)
    answer = DONE
    if case == "queued before it":
        child._send(before, 0)
    elif case == "large":
        answer = ("done", 1, [[tuple(range(DIRECT_BYTES))]], (0.0, 0.0, 0.0))
    elif case == "does not pickle":
        answer = ("done", 1, [[lambda: None]], (0.0, 0.0, 0.0))
    child._answer(answer, 0)
    assert child.wires[0].sent == []
    child._outbox.put(None)
    child._sender()
    sent = child.wires[0].sent
    if case == "queued before it":
        assert sent == [("batch", (before, answer))]
    elif case == "does not pickle":
        assert sent[0][:3] == ("error", 1, "")
    else:
        assert sent == [answer]


def test_the_sender_counts_down_what_it_wrote():
    """After the sender has written what was queued, an idle engine's answers are direct
    again (the count of queued messages is back at zero)."""
    import threading

    child = _answering(idle=True)
    sender = threading.Thread(target=child._sender, daemon=True)
    sender.start()
    try:
        child._send(("prefix", 1, (5,), False), 0)
        deadline = time.monotonic() + 5
        while child._pending and time.monotonic() < deadline:
            time.sleep(0.001)
        assert child._pending == 0
        child._answer(DONE, 0)
    finally:
        child._outbox.put(None)
        sender.join(5)
    assert child.wires[0].sent == [("prefix", 1, (5,), False), DONE]


# ---------------------------------------------------------------- a child's first message


def _say_ready(conn) -> None:
    conn.send(("ready", "CPUExecutionProvider"))


@pytest.mark.parametrize(
    ("target", "args", "message"),
    [
        (sys.exit, (3,), r"^the child ended while starting \(exit code 3\); see its log"),
        (time.sleep, (30,), r"^the child was still starting after 0\.5 s$"),
    ],
    ids=["exits", "silent"],
)
def test_a_child_that_ends_or_stays_silent_is_an_error(monkeypatch, target, args, message):
    """How the engine process and the front ends wait for a spawned child's first word."""
    import multiprocessing

    from service import children

    monkeypatch.setattr(children, "START_SECONDS", 0.5)
    context = multiprocessing.get_context("spawn")
    mine, theirs = context.Pipe()
    process = context.Process(target=target, args=args, daemon=True)
    process.start()
    try:
        with pytest.raises(RuntimeError, match=message):
            children.first_message(mine, process, "the child", "starting", RuntimeError)
    finally:
        process.kill()
        process.join(5)
        theirs.close()
        mine.close()


def test_a_childs_first_message_is_returned():
    import multiprocessing

    from service import children

    context = multiprocessing.get_context("spawn")
    mine, theirs = context.Pipe()
    process = context.Process(target=_say_ready, args=(theirs,), daemon=True)
    process.start()
    try:
        got = children.first_message(mine, process, "the child", "starting", RuntimeError)
        assert got == ("ready", "CPUExecutionProvider")
    finally:
        process.join(5)
        theirs.close()
        mine.close()

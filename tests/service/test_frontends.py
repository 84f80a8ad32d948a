"""``--frontends N``: several gRPC processes on one port sharing each model's engine
process (service/frontends.py).

Whatever process a connection lands on answers exactly as the in-process engine does;
all of them feed the one engine; ``/metrics`` of the main process sums every front end;
a front end or an engine that dies makes the server NOT_SERVING and ``nmt-serve`` exit 1;
a stop drains every front end.
"""

from __future__ import annotations

import os
import re
import signal

import grpc
import pytest

from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_api.nmt.v1 import translator_pb2_grpc as pb_grpc
from service.flags import parse_args
from tests.service.server_fixtures import TINY_MODEL
from tests.service.server_helpers import (
    TIMEOUT,
    free_port,
    proto_options,
    settled,
    spawn_serve,
    stub_for,
    wait_until,
)

CHANNELS = 24  # connections: the kernel spreads them over the processes by their ports
PROMPT = 10.0


def _connection(port: int):
    """A channel with a TCP connection of its own (channels with the same target and
    arguments share gRPC's global subchannel pool, so one connection, one process)."""
    channel = grpc.insecure_channel(
        f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)]
    )
    return channel, pb_grpc.TranslatorStub(channel)


def _requests_ok(samples) -> float:
    return sum(
        v
        for n, labels, v in samples.get("requests", ())
        if n == "nmt_requests_total" and labels.get("code") == "OK"
    )


@pytest.fixture(scope="module")
def pair(server_factory):
    """The in-process engine, and three front ends sharing an engine process."""
    local = server_factory()
    shared = server_factory(server={"frontends": 3, "http_port": 0})
    assert len(shared.frontends.members) == 2
    return local, shared


@pytest.fixture(scope="module")
def channels(pair):
    out = [_connection(pair[1].port) for _ in range(CHANNELS)]
    yield [stub for _, stub in out]
    for channel, _ in out:
        channel.close()


@pytest.mark.parametrize(
    "options",
    [proto_options(beam=1, return_scores=True), proto_options(beam=4, n_best=2)],
    ids=["greedy", "beam4-nbest2"],
)
def test_every_front_end_answers_like_the_in_process_engine(pair, channels, tiny_bundle, options):
    local, shared = pair
    texts = tiny_bundle.sentences[:6]
    _, want_stub = stub_for(local.port)
    want = want_stub.Translate(pb.TranslateRequest(texts=texts, options=options), timeout=TIMEOUT)
    calls = [
        stub.Translate.future(pb.TranslateRequest(texts=texts, options=options), timeout=TIMEOUT)
        for stub in channels
    ]
    for call in calls:
        got = call.result()
        for g, w in zip(got.translations, want.translations, strict=True):
            assert [(h.text, list(h.tokens)) for h in g.hypotheses] == [
                (h.text, list(h.tokens)) for h in w.hypotheses
            ]
            for gh, wh in zip(g.hypotheses, w.hypotheses, strict=True):
                assert gh.score == pytest.approx(wh.score, abs=1e-5)
    # The calls reached more than one process, and the front ends' own counts say so.
    members = shared.frontends.members
    assert wait_until(lambda: sum(_requests_ok(m.samples) for m in members) > 0, timeout=PROMPT)


def test_every_front_end_serves_the_http_port(pair, tiny_bundle):
    """--http-port with front ends: each binds the main process's HTTP port too."""
    import http.client
    import json

    from google.protobuf import json_format

    local, shared = pair
    members = shared.frontends.members
    texts = list(tiny_bundle.sentences[:3])
    _, want_stub = stub_for(local.port)
    want = want_stub.Translate(pb.TranslateRequest(texts=texts), timeout=TIMEOUT)
    before = sum(_requests_ok(m.samples) for m in members)
    ok = {"route": "/v1/translate", "status": "200"}
    answered = shared.registry.get_sample_value("nmt_http_responses_total", ok) or 0.0
    for _ in range(CHANNELS):  # a connection each: the kernel spreads them
        conn = http.client.HTTPConnection("127.0.0.1", shared.http_port, timeout=TIMEOUT)
        conn.request("POST", "/v1/translate", body=json.dumps({"texts": texts}))
        response = conn.getresponse()
        assert response.status == 200
        got = json_format.Parse(response.read(), pb.TranslateResponse())
        conn.close()
        assert [t.hypotheses[0].text for t in got.translations] == [
            t.hypotheses[0].text for t in want.translations
        ]
    assert wait_until(
        lambda: sum(_requests_ok(m.samples) for m in members) > before, timeout=PROMPT
    )
    # every process's HTTP answers are counted in the main process's metrics
    assert wait_until(
        lambda: (
            shared.registry.get_sample_value("nmt_http_responses_total", ok) == answered + CHANNELS
        ),
        timeout=PROMPT,
    )


def test_streams_through_every_front_end(pair, channels, tiny_bundle):
    local, _ = pair
    _, want_stub = stub_for(local.port)
    options = proto_options(beam=3)
    request = pb.TranslateStreamRequest(text=tiny_bundle.sentences[5], options=options)
    want = [(m.text, m.delta, m.final) for m in want_stub.TranslateStream(request, timeout=TIMEOUT)]
    for stub in channels:
        got = [(m.text, m.delta, m.final) for m in stub.TranslateStream(request, timeout=TIMEOUT)]
        assert got == want


def test_metrics_sum_every_front_end_and_one_engine(pair, channels, tiny_bundle):
    """The main process's /metrics counts the calls every process answered, and the one
    engine's requests are all of them (and each process's two warm-ups): the front ends
    share it."""
    _, shared = pair
    value = shared.registry.get_sample_value

    def calls() -> float:  # every call answered OK, any method, by any process
        return sum(
            s.value
            for family in shared.registry.collect()
            if family.name == "nmt_requests"
            for s in family.samples
            if s.name == "nmt_requests_total" and s.labels["code"] == "OK"
        )

    def jobs() -> float:
        return value("nmt_request_target_tokens_count") or 0.0

    warmups = 2 * (1 + len(shared.frontends.members))
    # The other processes report every heartbeat: start from counts all have reported.
    # Two stale reports can agree by chance (CI saw jobs and calls each one behind), so
    # the counts are read once they have stayed the same for several heartbeats.
    jobs_before, before = settled(lambda: (jobs(), calls()), timeout=PROMPT)
    assert jobs_before == before + warmups, (jobs_before, before)
    options = proto_options(beam=1)
    for stub in channels:
        stub.Translate(pb.TranslateRequest(texts=tiny_bundle.sentences[:2], options=options))
    assert wait_until(lambda: calls() >= before + CHANNELS, timeout=PROMPT), (calls(), before)
    jobs_after, after = settled(lambda: (jobs(), calls()), timeout=PROMPT)
    assert after == before + CHANNELS, (after, before)
    assert jobs_after == after + warmups, (jobs_after, after)
    main_own = shared.metrics.requests.labels("Translate", "OK")._value.get()
    assert main_own < value("nmt_requests_total", {"method": "Translate", "code": "OK"})
    for member in shared.frontends.members:
        labels = {"frontend": str(member.index)}
        assert value("nmt_frontend_process_cpu_seconds_total", labels) > 0
        passes = [
            value(
                "nmt_gc_pause_seconds_count",
                {"process": f"nmt-frontend-{member.index}", "generation": str(g)},
            )
            or 0.0
            for g in range(3)
        ]
        assert sum(passes) > 0, passes


def test_flags_need_the_engine_process():
    with pytest.raises(ValueError, match="--frontends > 1 shares .* --engine-process auto or on"):
        parse_args(["--frontends", "2", "--engine-process", "off"])
    with pytest.raises(ValueError, match=r"--frontends must be in 1\.\.64"):
        parse_args(["--frontends", "0"])
    assert parse_args(["--frontends", "4"]).frontends == 4


def test_a_killed_front_end_makes_the_server_not_serving(server_factory):
    server = server_factory(server={"frontends": 2})
    (member,) = server.frontends.members
    os.kill(member.process.pid, signal.SIGKILL)
    assert wait_until(server.failed.is_set, timeout=PROMPT)
    assert server.failure == "front end 1 exited (killed by SIGKILL)"
    assert not server.servicer.ready


def test_a_killed_engine_ends_every_front_end(server_factory):
    server = server_factory(server={"frontends": 2})
    (member,) = server.frontends.members
    os.kill(server.engines[TINY_MODEL].pid, signal.SIGKILL)
    assert wait_until(server.failed.is_set, timeout=PROMPT)
    assert server.failure.startswith(f"model {TINY_MODEL}: the engine process exited")
    # The front end's own watchdog sees its link die and exits 1.
    member.process.join(PROMPT + 5)
    assert member.process.exitcode == 1


def test_stop_drains_every_front_end(server_factory, tiny_bundle):
    server = server_factory(server={"frontends": 2})
    channels = [_connection(server.port) for _ in range(8)]
    try:
        request = pb.TranslateRequest(
            texts=tiny_bundle.sentences[:4], options=proto_options(beam=5, max_length_ratio=10.0)
        )
        calls = [stub.Translate.future(request, timeout=TIMEOUT) for _, stub in channels]
        server.stop(10.0)
        for call in calls:  # every call in flight finished, whichever process had it
            assert len(call.result().translations) == 4
    finally:
        for channel, _ in channels:
            channel.close()
    (member,) = server.frontends.members
    assert member.process.exitcode == 0
    assert server.engines[TINY_MODEL].process.exitcode is not None


def test_nmt_serve_exits_1_when_a_front_end_dies(tiny_bundle, tmp_path):
    port = free_port()
    log = open(tmp_path / "server.log", "w+")  # noqa: SIM115 - closed below
    proc = spawn_serve(tiny_bundle.repo, port, log, "--frontends", "2", start_new_session=True)
    try:

        def serving() -> bool:
            assert proc.poll() is None, "nmt-serve exited during start-up"
            log.seek(0)
            return "serving on port" in log.read()

        assert wait_until(serving, timeout=180, every=0.2), "nmt-serve never served"
        channel, stub = stub_for(port)
        with channel:
            reply = stub.ListModels(pb.ListModelsRequest(), timeout=TIMEOUT)
            assert [m.name for m in reply.models] == [TINY_MODEL]
        log.seek(0)
        (front,) = re.findall(r"front end 1 serving \(pid (\d+)\)", log.read())
        os.kill(int(front), signal.SIGKILL)
        assert proc.wait(timeout=60) == 1
        log.seek(0)
        output = log.read()
        assert "exiting for a restart: front end 1 exited (killed by SIGKILL)" in output, output
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()

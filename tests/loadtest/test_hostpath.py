"""The scheduler instrumentation of ``loadtest.hostpath`` on a real in-process server: it
times host-path steps (``session.run``) and IO-bound ones (``run_with_iobinding``, CUDA's
path, here on the CPU provider), and its table shows what it could not measure as –."""

from __future__ import annotations

import pytest

from loadtest import hostpath
from nmt_api.nmt.v1 import translator_pb2 as pb
from service.sessions import RuntimeConfig
from tests.service.server_fixtures import TINY_MODEL
from tests.service.server_helpers import TIMEOUT, stub_for


@pytest.mark.parametrize("io_binding", ["off", "on"])
def test_steps_are_timed_with_and_without_io_binding(server_factory, tiny_bundle, io_binding):
    runtime = RuntimeConfig(providers=("cpu",), intra_op_threads=1, io_binding=io_binding)
    server = server_factory(server={"runtime": runtime})
    engine = server.engines[TINY_MODEL]
    assert engine.bundle.model.io_binding is (io_binding == "on")
    hostpath.install(engine)
    channel, stub = stub_for(server.port)
    try:
        request = pb.TranslateRequest(texts=list(tiny_bundle.sentences[:6]))
        assert len(stub.Translate(request, timeout=TIMEOUT).translations) == 6
        parts = hostpath.harvest(engine)
    finally:
        channel.close()
        hostpath.uninstall(engine)
    assert parts["steps"] > 0 and parts["step_wall_us"] > 0 and parts["ort_wall_us"] > 0
    # rows are read from the feeds; an IO-bound step's are on the device, not counted
    assert (parts["rows_per_step"] is None) is (io_binding == "on")
    summary = [
        {"strategy": "greedy", "clients": 1, "engine_process": "off", "sentences_per_s": 1.0}
        | {"p50_ms": 1.0, "p95_ms": 2.0, "breakdown": parts}
        | {"cpu_ms_per_sentence": {"process": 1.0, "clients": 0.1}}
    ]
    row = hostpath.table(summary).splitlines()[-1]
    assert "None" not in row
    assert (" | – | " in row) is (io_binding == "on")  # the rows column


@pytest.mark.parametrize(
    "argv",
    [["--levels", "greedy32"], ["--levels", "beamx:4"], ["--engine-process", "maybe"]],
)
def test_bad_arguments_are_one_line_errors(argv, capsys):
    with pytest.raises(SystemExit):
        hostpath.main(argv)
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


def test_the_capturing_sessions_of_cuda_graphs_are_timed_too():
    """On CUDA the fixed buffers' steps run in sessions of their own (made to capture):
    each is timed once, beside the plain ones; on the CPU they are the plain sessions."""
    from types import SimpleNamespace as Fake

    plain, single, greedy, greedy_1, captured = (Fake(name=n) for n in "abcde")
    model = Fake(
        decoder=plain,
        _decoder_1=single,
        _greedy=greedy,
        _greedy_1=greedy_1,
        graph_steps=Fake(session=plain),  # the CPU: the decoder's own session
        greedy_graph_steps=Fake(session=captured),
    )
    sessions = [s for s, _ in hostpath._decoder_sessions(model)]
    assert sessions == [plain, single, greedy, greedy_1, captured]
    model.greedy_graph_steps = None
    assert captured not in [s for s, _ in hostpath._decoder_sessions(model)]

"""The forced tokens' output (:mod:`service.forced`): the row the decoder's top-k ranks,
exposed as a graph output at load time; and what a model that cannot expose it serves."""

from __future__ import annotations

import grpc
import numpy as np
import onnx
import onnxruntime as ort
import pytest

from export import spec
from nmt_api.nmt.v1 import translator_pb2 as pb
from service import forced, topk
from tests.committed import EN_ES_FP32, EN_ES_INT8
from tests.service.server_helpers import TIMEOUT, rpc_error, stub_for
from tests.service.test_topk import graph


def session(data: bytes) -> ort.InferenceSession:
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("chunked", [False, True], ids=["one-topk", "chunked-topk"])
def test_the_output_is_the_row_the_topk_ranks(chunked):
    data = graph(100)
    got = forced.exposed(data)
    if chunked:
        data, got = topk.chunked(data, 100), topk.chunked(got, 100)
    plain, exposed = session(data), session(got)
    rng = np.random.default_rng(0)
    z = rng.normal(size=(6, 100)).astype(np.float32) * 4
    feeds = {"z": z, "k": np.array([5], dtype=np.int64)}
    names = [spec.TOPK_LOG_PROBS, spec.TOPK_IDS]
    want = plain.run(names, feeds)
    values, ids, row = exposed.run([*names, forced.STEP_LOG_PROBS], feeds)
    np.testing.assert_array_equal(values, want[0])
    np.testing.assert_array_equal(ids, want[1])
    # log_softmax(z) plus the blocked columns (0 and 2 at -inf), whose best 5 are the top-k
    expected = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    expected[:, [0, 2]] = -np.inf
    np.testing.assert_allclose(row, expected, atol=1e-5)
    np.testing.assert_array_equal(np.take_along_axis(row, ids, axis=1), values)


@pytest.mark.parametrize("bundle", [EN_ES_FP32, EN_ES_INT8], ids=["fp32", "int8"])
def test_committed_bundles_expose_it_without_changing_a_step(bundle):
    data = (bundle / spec.DECODER_FILE).read_bytes()
    assert forced.unsupported(bundle / spec.DECODER_FILE) is None
    model = onnx.load_from_string(forced.exposed(data))
    outputs = [o.name for o in model.graph.output]
    assert outputs[-1] == forced.STEP_LOG_PROBS and outputs[:-1] == [
        o.name for o in onnx.load_from_string(data).graph.output
    ]
    # no node added: the TopK's input itself, renamed
    assert len(model.graph.node) == len(onnx.load_from_string(data).graph.node)


def test_what_it_cannot_expose_is_refused_by_name(tmp_path):
    with pytest.raises(forced.ForcedError, match="not a readable ONNX model"):
        forced.exposed(b"not onnx")
    with pytest.raises(forced.ForcedError, match="no TopK node writes"):
        model = onnx.load_from_string(graph(100))
        model.graph.node[-1].output[0] = "renamed"
        forced.exposed(model.SerializeToString())
    model = onnx.load_from_string(graph(100))
    model.graph.node[0].output[0] = forced.STEP_LOG_PROBS
    model.graph.node[1].input[0] = forced.STEP_LOG_PROBS
    with pytest.raises(forced.ForcedError, match="already has a value named"):
        forced.exposed(model.SerializeToString())
    onnx.save(onnx.load_from_string(graph(100)), tmp_path / "m.onnx",
              save_as_external_data=True, size_threshold=0)  # fmt: skip
    with pytest.raises(forced.ForcedError, match=r"external data \(blocked, ...\)"):
        forced.exposed((tmp_path / "m.onnx").read_bytes())
    assert "external data" in forced.unsupported(tmp_path / "m.onnx")
    # a TopK straight over a graph input: nothing to rename
    model = onnx.load_from_string(graph(100, blocked=None, no_softmax=True))
    with pytest.raises(forced.ForcedError, match="a graph input, output or constant"):
        forced.exposed(model.SerializeToString())


@pytest.fixture(scope="module", params=["in-process", "engine-process"])
def server(server_factory, request):
    engine_process = "on" if request.param == "engine-process" else "off"
    return server_factory(server={"engine_process": engine_process})


def test_a_model_that_cannot_force_tokens_refuses_score_and_prefixes(server, monkeypatch):
    """Its front end knows (a front end's model is RemoteModel, whose reason comes from
    the same checks): INVALID_ARGUMENT naming why, while plain translations are served."""
    model = server.engines["tiny"].bundle.model
    monkeypatch.setattr(model, "forcing_error", "the decoder keeps weights in external data")
    channel, stub = stub_for(server.port)
    with channel:
        error = rpc_error(lambda: stub.Score(pb.ScoreRequest(texts=["a"], targets=["b"])))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "cannot score forced tokens (the decoder keeps weights" in error.details()
        request = pb.TranslateRequest(texts=["a house"], target_prefix=["una"])
        error = rpc_error(lambda: stub.Translate(request, timeout=TIMEOUT))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        reply = stub.Translate(pb.TranslateRequest(texts=["a house"]), timeout=TIMEOUT)
        assert reply.translations[0].hypotheses

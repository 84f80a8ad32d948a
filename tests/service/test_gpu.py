"""The committed demo model on the CUDA execution provider with IO binding: the server
picks the fp32 version, and GPU decoding equals CPU decoding of the same bundle (tokens
exactly, scores within 1e-4; TF32 is off for that reason). Skips without a GPU and
onnxruntime-gpu, as on CI; run it on a GPU machine with ``pytest tests/service/test_gpu.py``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
import numpy as np
import onnxruntime as ort
import pytest
from prometheus_client import CollectorRegistry

from models.options import DecodeOptions
from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_api.nmt.v1 import translator_pb2_grpc as pb_grpc
from service import topk
from service.bundle import BundleError, load_bundle
from service.decoding import pad_batch
from service.limits import ADMISSION, LIVE_ROWS
from service.loop import decode
from service.server import ServerConfig, create_server
from service.sessions import RuntimeConfig
from tests.committed import EN_ES_FP32, EN_ES_FP32_VERSION
from tests.service.test_topk import KINDS, compare_topks, graph, ks_of

ROOT = Path(__file__).resolve().parents[2]
REPO = ROOT / "model_repository"
FP32 = EN_ES_FP32
TEST_EN = ROOT / "models" / "pretrained" / "en-es" / "test.en"
GPU = RuntimeConfig(providers=("cuda",), require_gpu=True)


@pytest.fixture(scope="module")
def gpu_bundle():
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("needs a GPU and onnxruntime-gpu")
    try:
        return load_bundle(FP32, GPU)
    except BundleError as exc:  # onnxruntime-gpu installed, but no usable GPU or CUDA
        pytest.skip(f"the CUDA provider does not run here: {exc}")


@pytest.fixture(scope="module")
def cpu_bundle():
    return load_bundle(FP32, RuntimeConfig(providers=("cpu",)))


def sources(bundle, n: int) -> list[list[int]]:
    lines = TEST_EN.read_text(encoding="utf-8").splitlines()[:n]
    return [bundle.src_tokenizer.encode(line) for line in lines]


def assert_alike(got, want) -> None:
    """Two decodes' n-best lists: the same tokens, scores within 1e-4."""
    assert [[h.tokens for h in x] for x in got] == [[h.tokens for h in x] for x in want]
    for g, w in zip(got, want, strict=True):
        assert [h.score for h in g] == pytest.approx([h.score for h in w], abs=1e-4)


@pytest.mark.parametrize(("beam", "n"), [(1, 500), (5, 100)])
def test_gpu_decodes_like_cpu(gpu_bundle, cpu_bundle, beam, n):
    assert gpu_bundle.model.provider == "CUDAExecutionProvider" and gpu_bundle.model.io_binding
    src = sources(cpu_bundle, n)
    options = DecodeOptions(beam_size=beam, n_best=beam, return_attention=True)
    want = decode(cpu_bundle.model, src, options=options, special=cpu_bundle.special)
    got = decode(gpu_bundle.model, src, options=options, special=gpu_bundle.special)
    assert_alike(got, want)
    for g, w in zip(got, want, strict=True):
        assert abs(g[0].attention - w[0].attention).max() < 1e-4


def test_server_on_gpu_serves_the_fp32_version(gpu_bundle):
    config = ServerConfig(host="127.0.0.1", port=0, metrics_port=-1, runtime=GPU)
    server, port = create_server(config, registry=CollectorRegistry())
    server.start()
    try:
        assert server.engine_process  # --engine-process auto: a child process on CUDA
        server.warm_up()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.TranslatorStub(channel)
            models = stub.ListModels(pb.ListModelsRequest(), timeout=30).models
            (info,) = [m for m in models if m.name == "en-es"]
            assert (info.version, info.precision) == (EN_ES_FP32_VERSION, "fp32")
            assert info.execution_provider == "CUDAExecutionProvider"
            reply = stub.Translate(
                pb.TranslateRequest(texts=["Where is the train station?"]), timeout=30
            )
        assert "estación" in reply.translations[0].hypotheses[0].text
        # the child's engine admits and decodes with the GPU's settings (limits.ADMISSION,
        # limits.LIVE_ROWS)
        admission = server.engines["en-es"].call(_admission)
        assert admission == ADMISSION[True] | {"max_live_rows": LIVE_ROWS[True]}
        # requests are checked in this process against the same limits
        assert server.engines["en-es"].config.max_live_rows == LIVE_ROWS[True]
    finally:
        server.stop(0)


def _admission(engine) -> dict:
    """Run in the engine process: the admission settings its engine uses."""
    return {name: getattr(engine.config, name) for name in [*ADMISSION[True], "max_live_rows"]}


def test_cuda_graphs_replay_steps_and_decode_like_plain_steps(gpu_bundle):
    """On CUDA the steps replay from captured graphs (``--cuda-graphs auto``), and the
    translations are plain CUDA steps' (tokens exactly; scores within 1e-4, padded rows
    change cuBLAS's shapes)."""
    steps = gpu_bundle.model.graph_steps
    assert steps is not None and steps.capture and steps.enabled
    plain = load_bundle(
        FP32, RuntimeConfig(providers=("cuda",), require_gpu=True, cuda_graphs="off")
    )
    assert plain.model.graph_steps is None
    src = sources(plain, 300)
    for options in (DecodeOptions(), DecodeOptions(beam_size=5, n_best=2)):
        before = gpu_bundle.model.stats.graph_steps
        want = decode(plain.model, src, options=options, special=plain.special)
        got = decode(gpu_bundle.model, src, options=options, special=gpu_bundle.special)
        assert_alike(got, want)
        assert gpu_bundle.model.stats.graph_steps > before and steps.enabled  # no capture failed
    assert gpu_bundle.model.encoder_graphs.enabled


@pytest.mark.parametrize("cuda_graphs", ["on", "off"])
def test_greedy_steps_on_cuda_decode_like_single_steps(cpu_bundle, cuda_graphs):
    """``--greedy-steps 4`` on CUDA (auto is one step a call there): the composed graph
    bound (``--cuda-graphs off``) or captured per bucket on the decoder's state buffers,
    with no capture failing; the translations are one step a call's on the CPU (tokens
    exactly, scores within 1e-4)."""
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("needs a GPU and onnxruntime-gpu")
    config = RuntimeConfig(
        providers=("cuda",), require_gpu=True, greedy_steps=4, cuda_graphs=cuda_graphs
    )
    gpu = load_bundle(FP32, config)
    model = gpu.model
    assert model.greedy_steps == 4
    assert (model.greedy_graph_steps is not None) == (cuda_graphs == "on")
    src = sources(cpu_bundle, 300)
    options = [DecodeOptions(), DecodeOptions(min_length=3, max_length=9)]
    for option in options:
        want = decode(cpu_bundle.model, src, options=option, special=cpu_bundle.special)
        before = model.stats.graph_steps
        got = decode(model, src, options=option, special=gpu.special)
        # with fixed buffers every call goes through them (the graphs replay after their
        # first CAPTURE_RUNS; a failed capture switches them off, checked below)
        assert (model.stats.graph_steps > before) == (cuda_graphs == "on")
        assert_alike(got, want)
    stats = model.stats
    assert stats.decoder_steps > stats.decoder_calls  # calls of several steps ran
    if cuda_graphs == "on":
        assert model.greedy_graph_steps.enabled and model.greedy_graph_steps.graphs > 0


def test_encoder_calls_replay_from_graphs_and_encode_like_plain_calls(gpu_bundle):
    """On CUDA the encoder runs on sessions of fixed shape buckets, captured as graphs
    by the first thread that encodes (:mod:`service.encodergraphs`; here pytest's, the
    thread every test of this module runs in): the same memory, keys, mask and states as a
    plain CUDA call within 1e-5 (padding changes cuDNN's shapes), no capture refused,
    no replayed graph found off by prepare's check."""
    graphs = gpu_bundle.model.encoder_graphs
    assert graphs is not None and graphs.capture and graphs.enabled
    plain = load_bundle(
        FP32, RuntimeConfig(providers=("cuda",), require_gpu=True, cuda_graphs="off")
    )
    assert plain.model.encoder_graphs is None
    stats = gpu_bundle.model.stats
    for n in (1, 7, 30, 100):
        ids, lengths = pad_batch(sources(plain, n), plain.config.pad_id)
        before = stats.graph_encodes
        got = gpu_bundle.model.encode(ids, lengths)
        want = plain.model.encode(ids, lengths)
        width = ids.shape[1]
        for g, w in ((got.memory, want.memory), (got.keys, want.keys)):
            np.testing.assert_allclose(np.array(g)[:, :width], np.array(w), atol=1e-5)
        assert np.array_equal(np.array(got.mask)[:, :width], np.array(want.mask))
        for g, w in zip(got.states, want.states, strict=True):
            np.testing.assert_allclose(np.array(g), np.array(w), atol=1e-5)
        assert stats.graph_encodes == before + 1 and graphs.enabled and graphs.prepared
    # another thread's call (ONNX Runtime keeps graphs per thread) runs the plain way
    other = []
    thread = threading.Thread(target=lambda: other.append(gpu_bundle.model.encode(ids, lengths)))
    thread.start()
    thread.join()
    assert stats.graph_encodes == before + 1
    np.testing.assert_allclose(np.array(other[0].memory), np.array(want.memory), atol=1e-5)


@pytest.mark.parametrize("vocab,opset", [(4000, 17), (120, 17), (100, 18), (37, 13)])
def test_chunked_topk_on_cuda_gives_what_one_topk_gives(gpu_bundle, vocab, opset):
    """The two-level top-k (:mod:`service.topk`, ``--chunked-topk on``) on CUDA against
    one CUDA TopK: the same values, ids and order (ties, infinities, NaN rows, every k).
    ``auto`` keeps it off on CUDA until this passes and it is measured faster there."""
    data = graph(vocab, opset=opset)
    cuda = ["CUDAExecutionProvider"]
    one = ort.InferenceSession(data, providers=cuda)
    two = ort.InferenceSession(topk.chunked(data, vocab), providers=cuda)
    assert compare_topks(one, two, vocab, rows=40) == len(KINDS) * len(ks_of(vocab))


def test_chunked_topk_on_cuda_replays_and_decodes_like_one_topk(gpu_bundle):
    """``--chunked-topk on`` on CUDA (auto is off there): the steps still replay from
    captured graphs (``Min(k, chunks)`` included), and the translations are one TopK's
    on CUDA (tokens exactly, scores within 1e-4)."""
    assert not gpu_bundle.model.chunked_topk  # auto: off on CUDA
    chunked = load_bundle(
        FP32, RuntimeConfig(providers=("cuda",), require_gpu=True, chunked_topk="on")
    )
    assert chunked.model.chunked_topk
    steps = chunked.model.graph_steps
    src = sources(chunked, 300)
    for options in (DecodeOptions(), DecodeOptions(beam_size=5, n_best=2)):
        before = chunked.model.stats.graph_steps
        want = decode(gpu_bundle.model, src, options=options, special=gpu_bundle.special)
        got = decode(chunked.model, src, options=options, special=chunked.special)
        assert_alike(got, want)
        assert chunked.model.stats.graph_steps > before and steps.enabled  # no capture failed

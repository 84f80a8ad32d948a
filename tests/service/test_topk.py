"""The decoder's top-k in two levels (:mod:`service.topk`): the rewrite gives what the
one TopK gives, bit for bit (values, ids, order), on ties, infinities, NaN rows and every
k, padded or not, on synthetic graphs and the committed bundles; a top-k it cannot
rewrite exactly is refused by name and served as it is; ``--chunked-topk`` decides."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from export import spec
from loadtest.ortprofile import step_feeds
from models.options import DecodeOptions
from service import topk
from service.bundle import load_bundle
from service.loop import decode
from service.sessions import RuntimeConfig

REPOSITORY = Path(__file__).resolve().parents[2] / "model_repository"
BUNDLES = ["en-es/7", "en-es/8", "en-es-luong/2"]


def graph(vocab: int, *, opset: int = 17, blocked=True, dtype=np.float32, **changes) -> bytes:
    """A decoder tail as the exporter writes it: ``topk(log_softmax(z) + blocked, k)``
    with the contract's output names; ``changes`` break one thing at a time."""
    inits = []
    nodes = [helper.make_node("LogSoftmax", ["z"], ["ls"], axis=changes.get("softmax_axis", -1))]
    x = "ls"
    if changes.get("no_softmax"):
        x = "z"
    if blocked is not None:
        column = np.zeros(changes.get("blocked_size", vocab), dtype=dtype)
        column[[0, 2 % vocab]] = -np.inf
        if "blocked_value" in changes:
            column[1] = changes["blocked_value"]
        inits.append(numpy_helper.from_array(column, "blocked"))
        nodes.append(helper.make_node("Add", [x, "blocked"], ["ranked"]))
        x = "ranked"
    if (
        "ensemble" in changes
    ):  # export.ensemble's log-linear sum: x + w * (log_softmax(-z) + blocked)
        weight = np.asarray(changes["ensemble"], dtype=dtype)
        inits.append(numpy_helper.from_array(weight, "weight"))
        nodes.append(helper.make_node("Neg", ["z"], ["minus_z"]))
        nodes.append(helper.make_node("LogSoftmax", ["minus_z"], ["ls2"], axis=-1))
        nodes.append(helper.make_node("Add", ["ls2", "blocked"], ["ranked2"]))
        nodes.append(helper.make_node("Mul", ["ranked2", "weight"], ["weighted2"]))
        nodes.append(helper.make_node("Sum", [x, "weighted2"], ["combined"]))
        x = "combined"
    attrs = {"axis": changes.get("axis", -1)}
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    if "largest" in changes:
        attrs["largest"] = changes["largest"]
    nodes.append(helper.make_node("TopK", [x, "k"], [spec.TOPK_LOG_PROBS, spec.TOPK_IDS], **attrs))
    g = helper.make_graph(
        nodes,
        "tail",
        [
            helper.make_tensor_value_info("z", elem, ["rows", vocab]),
            helper.make_tensor_value_info("k", TensorProto.INT64, [1]),
        ],
        [
            helper.make_tensor_value_info(spec.TOPK_LOG_PROBS, elem, ["rows", "k"]),
            helper.make_tensor_value_info(spec.TOPK_IDS, TensorProto.INT64, ["rows", "k"]),
        ],
        inits,
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


def session(data: bytes) -> ort.InferenceSession:
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"])


def rows_of(kind: str, rng, rows: int, vocab: int) -> np.ndarray:
    """Logits ``(rows, vocab)`` of one hard kind."""
    z = rng.normal(size=(rows, vocab))
    if kind == "ties":  # few distinct values: ties everywhere, across chunks
        z = rng.integers(-2, 2, size=(rows, vocab)).astype(float)
    elif kind == "neg-inf":  # mostly banned columns, some rows all banned
        z[rng.random(z.shape) < 0.9] = -np.inf
        z[0] = -np.inf
    elif kind == "nan":  # a NaN anywhere: log_softmax makes the row NaN
        z[rng.random(z.shape) < 0.01] = np.nan
        z[0] = np.nan
    elif kind == "pos-inf":
        z[rng.random(z.shape) < 0.05] = np.inf
    elif kind == "large":
        z *= 1e30
    return z.astype(np.float32)


KINDS = ["normal", "ties", "neg-inf", "nan", "pos-inf", "large"]


@pytest.mark.parametrize(
    "vocab,width,opset",
    [(4000, 32, 17), (120, 32, 17), (100, 7, 18), (37, 8, 13), (64, 32, 18)],
    ids=["4000-divides", "120-padded", "100-opset18", "37-opset13", "64-two-chunks"],
)
@pytest.mark.parametrize("blocked", [True, None], ids=["blocked", "plain"])
def test_rewrite_gives_what_one_topk_gives(vocab, width, opset, blocked):
    data = graph(vocab, opset=opset, blocked=blocked)
    one, two = session(data), session(topk.chunked(data, vocab, width))
    checked = compare_topks(one, two, vocab, rows=5, width=width)
    assert checked == len(KINDS) * len(ks_of(vocab, width))


def ks_of(vocab: int, width: int = topk.WIDTH) -> list[int]:
    """The k worth checking: small ones, around the number of chunks, the vocabulary."""
    chunks = -(-vocab // width)
    return sorted({1, 2, 3, 10, chunks, chunks + 1, vocab - 1, vocab} & set(range(1, vocab + 1)))


def compare_topks(one, two, vocab: int, *, rows: int, width: int = topk.WIDTH) -> int:
    """Run sessions ``one`` (a TopK) and ``two`` (its rewrite) on ``rows`` rows of every
    kind in :data:`KINDS` for every k of :func:`ks_of`; assert the same values, ids and
    order. Returns how many cases it checked."""
    rng = np.random.default_rng(vocab)
    checked = 0
    for kind in KINDS:
        z = rows_of(kind, rng, rows, vocab)
        for k in ks_of(vocab, width):
            feeds = {"z": z, "k": np.array([k], dtype=np.int64)}
            want_values, want_ids = one.run(None, feeds)
            got_values, got_ids = two.run(None, feeds)
            assert got_ids.shape == (rows, k)
            np.testing.assert_array_equal(got_ids, want_ids, err_msg=f"{kind}, k={k}")
            np.testing.assert_array_equal(got_values, want_values, err_msg=f"{kind}, k={k}")
            checked += 1
    return checked


@pytest.mark.parametrize("weight", [1.0, 0.5, 3.0])
def test_an_ensembles_combination_is_rewritten_exactly(weight):
    """An ensemble's log-linear sum of members' log-probs (export.ensemble): the same
    values, ids and order as its TopK, on every kind of row."""
    data = graph(100, ensemble=weight)
    one, two = session(data), session(topk.chunked(data, 100, 32))
    assert compare_topks(one, two, 100, rows=5, width=32) == len(KINDS) * len(ks_of(100, 32))


def test_rewrite_replaces_the_topk():
    """One TopK over the vocabulary becomes three small ones and a ReduceMax."""
    from onnx import load_from_string

    ops = [n.op_type for n in load_from_string(topk.chunked(graph(4000), 4000)).graph.node]
    assert ops.count("TopK") == 3 and "ReduceMax" in ops and "Pad" not in ops
    padded = [n.op_type for n in load_from_string(topk.chunked(graph(120), 120)).graph.node]
    assert "Pad" in padded


@pytest.mark.parametrize(
    "changes,message",
    [
        (dict(no_softmax=True), "not log_softmax"),
        (dict(blocked_value=np.nan), "holds NaN or \\+inf"),
        (dict(blocked_value=np.inf), "holds NaN or \\+inf"),
        (dict(dtype=np.float64), "not raw float32"),
        (dict(dtype=np.float64, blocked=None), "topk_log_probs is not float32"),
        (dict(blocked_size=99), "has 99 columns, the vocabulary 100"),
        (dict(largest=0), "largest-first"),
        (dict(axis=0), "axis 0"),
        (dict(opset=12), "opset is 12"),
        (dict(ensemble=-0.5), "the weight weight before the TopK is not one positive number"),
        (dict(ensemble=np.nan), "not one positive number"),
        (dict(ensemble=[0.5, 0.5]), "not one positive number"),
        (dict(ensemble=0.5, blocked_value=3e38), "added in an ensemble is not <= 0"),
    ],
)
def test_refused_by_name(changes, message):
    changes = dict(changes)
    opset = changes.pop("opset", 17)
    with pytest.raises(topk.TopKError, match=message):
        topk.chunked(graph(100, opset=opset, **changes), 100)


def test_refuses_what_it_cannot_rewrite_as_bytes(tmp_path):
    """Unreadable bytes, weights in external data (the rewritten bytes would not find
    them) and a graph already using the rewrite's names: refused, served as they are."""
    import onnx

    with pytest.raises(topk.TopKError, match="not a readable ONNX model"):
        topk.chunked(b"not an onnx model", 100)
    model = onnx.load_from_string(graph(100))
    onnx.save(model, tmp_path / "m.onnx", save_as_external_data=True, size_threshold=0)
    with pytest.raises(topk.TopKError, match=r"external data \(blocked, ...\)"):
        topk.chunked((tmp_path / "m.onnx").read_bytes(), 100)
    model = onnx.load_from_string(graph(100))
    model.graph.node[0].output[0] = "chunked_topk_view"
    model.graph.node[1].input[0] = "chunked_topk_view"
    with pytest.raises(topk.TopKError, match="already has a name starting 'chunked_topk_'"):
        topk.chunked(model.SerializeToString(), 100)


def test_zero_rows():
    data = graph(100)
    one, two = session(data), session(topk.chunked(data, 100))
    feeds = {"z": np.zeros((0, 100), dtype=np.float32), "k": np.array([3], dtype=np.int64)}
    want, got = one.run(None, feeds), two.run(None, feeds)
    assert [g.shape for g in got] == [w.shape for w in want] == [(0, 3), (0, 3)]


def test_refuses_a_vocabulary_of_one_chunk_and_a_graph_without_the_topk():
    with pytest.raises(topk.TopKError, match="not wider than one chunk"):
        topk.chunked(graph(32), 32)
    data = graph(100)
    from onnx import load_from_string

    model = load_from_string(data)
    model.graph.node[-1].output[0] = "renamed"
    with pytest.raises(topk.TopKError, match="no TopK node writes topk_log_probs"):
        topk.chunked(model.SerializeToString(), 100)


@pytest.fixture(scope="module", params=BUNDLES)
def committed(request):
    bundle = load_bundle(
        REPOSITORY / request.param,
        RuntimeConfig(providers=("cpu",), intra_op_threads=1, chunked_topk="off"),
    )
    path = REPOSITORY / request.param / spec.DECODER_FILE
    chunked = topk.chunked(path.read_bytes(), bundle.config.tgt_vocab_size)
    return bundle, session(path.read_bytes()), session(chunked)


@pytest.mark.parametrize("rows,k", [(1, 1), (7, 3), (33, 10), (5, 200)])
def test_committed_bundles_step_alike(committed, rows, k):
    """Every output of a decoder step (states and attention too) is the same."""
    bundle, one, two = committed
    feeds = step_feeds(bundle, rows, 9, top_k=k, seed=rows)
    want, got = one.run(None, feeds), two.run(None, feeds)
    assert len(got) == len(want) >= 5 and got[0].shape == (rows, k)
    for g, w, name in zip(got, want, [o.name for o in one.get_outputs()], strict=True):
        np.testing.assert_array_equal(g, w, err_msg=name)


@pytest.mark.parametrize(
    "mode,providers,expected",
    [("auto", ("cpu",), True), ("on", ("cpu",), True), ("off", ("cpu",), False)],
)
def test_mode_decides(tiny_bundle, mode, providers, expected):
    bundle = load_bundle(
        tiny_bundle.bundle_dir, RuntimeConfig(providers=providers, chunked_topk=mode)
    )
    assert bundle.model.chunked_topk is expected


def test_bad_mode_is_refused():
    with pytest.raises(ValueError, match=r"chunked_topk must be one of \['auto', 'on', 'off'\]"):
        RuntimeConfig(chunked_topk="yes")


OPTIONS = [
    DecodeOptions(max_length=30),
    DecodeOptions(beam_size=5, n_best=3, max_length=30),
    DecodeOptions(sampling_topk=50, sampling_temperature=1.3, seed=7, max_length=30),
]


@pytest.mark.parametrize("options", OPTIONS, ids=["greedy", "beam5", "sampling50"])
def test_translations_alike_on_and_off(tiny_bundle, options):
    """The served tiny bundle (120 pieces: padded chunks) decodes the same either way."""
    texts = ["the cat sleeps", "a dog runs in the park today", "yes", "where is the station"]
    results = []
    for mode in ("off", "on"):
        bundle = load_bundle(
            tiny_bundle.bundle_dir,
            RuntimeConfig(providers=("cpu",), intra_op_threads=1, chunked_topk=mode),
        )
        assert bundle.model.chunked_topk is (mode == "on")
        ids = bundle.src_tokenizer.encode_batch(texts)
        out = decode(bundle.model, ids, options=options, special=bundle.special, batch_size=3)
        results.append([[(h.tokens, h.score, h.log_prob) for h in hyps] for hyps in out])
    assert results[0] == results[1]
    assert any(len(hyps[0][0]) > 1 for hyps in results[0])


def test_a_topk_it_cannot_rewrite_still_serves(tiny_bundle, monkeypatch, caplog):
    def refuse(data, vocab_size, width=topk.WIDTH):
        raise topk.TopKError("the TopK's input is not log_softmax over the vocabulary")

    monkeypatch.setattr(topk, "chunked", refuse)
    with caplog.at_level(logging.WARNING, logger="service.runtime"):
        bundle = load_bundle(
            tiny_bundle.bundle_dir, RuntimeConfig(providers=("cpu",), chunked_topk="on")
        )
    assert bundle.model.chunked_topk is False
    assert "top-k: one TopK (the TopK's input is not log_softmax" in caplog.text
    ids = bundle.src_tokenizer.encode_batch(["the cat sleeps"])
    out = decode(bundle.model, ids, options=DecodeOptions(max_length=10), special=bundle.special)
    assert out[0][0].tokens

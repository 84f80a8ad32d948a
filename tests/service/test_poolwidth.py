"""The load-time rewrite that makes attention's sums over the source independent of the
memory pool's width (:mod:`service.poolwidth`): on the committed bundles, exported before
the exporter wrote those sums so, a sentence decodes bit for bit alike alone and beside a
longer one; the rewrite changes nothing else, and leaves graphs without the patterns as
they are."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from service import poolwidth
from service.bundle import load_bundle
from service.loop import decode
from service.sessions import RuntimeConfig
from tests.committed import ROOT

REPO = ROOT / "model_repository"
# (bundle, sums rewritten): the context product; the Luong model's general scores too
BUNDLES = [("en-es/7", 1), ("en-es/8", 1), ("en-es-luong/2", 2)]
# a sentence of en-es/8 whose 16-best list and score moved beside a 20-token sentence
# before the rewrite (helper-80's audit, 2026-11-29)
MOVED = "It's 100% true that 2+2=4, isn't it?"
TEST = (ROOT / "models" / "pretrained" / "en-es" / "test.en").read_text().splitlines()


def load(bundle: str, rewrite: bool = True, monkeypatch=None):
    if not rewrite:
        monkeypatch.setattr(poolwidth, "width_invariant", lambda data: (data, 0))
    return load_bundle(REPO / bundle, RuntimeConfig(providers=("cpu",), intra_op_threads=1))


@pytest.mark.parametrize(("bundle", "sums"), BUNDLES)
def test_the_committed_decoders_have_their_sums_rewritten(bundle, sums):
    data = (REPO / bundle / "decoder.onnx").read_bytes()
    rewritten, count = poolwidth.width_invariant(data)
    assert count == sums and rewritten != data
    # the rewritten graph is a valid ONNX model, and a second pass finds nothing to do
    onnx.checker.check_model(onnx.load_from_string(rewritten))
    assert poolwidth.width_invariant(rewritten) == (rewritten, 0)


@pytest.mark.parametrize(("bundle", "sums"), BUNDLES)
def test_a_sentence_decodes_alike_alone_and_beside_a_longer_one(bundle, sums):
    b = load(bundle)
    partner = b.src_tokenizer.encode(" ".join(" ".join(TEST).split()[:60]))
    sources = [b.src_tokenizer.encode(line) for line in [MOVED, *TEST[:40]]]
    for beam, n_best in ((1, 1), (5, 3), (16, 16)):
        options = dataclasses.replace(
            b.decoding, beam_size=beam, n_best=n_best, return_token_scores=True
        )
        for source in sources if beam < 16 else sources[:1]:
            (alone,) = decode(b.model, [source], options=options, special=b.special)
            beside = decode(b.model, [source, partner], options=options, special=b.special)[0]
            assert [(h.tokens, h.score, h.token_log_probs) for h in alone] == [
                (h.tokens, h.score, h.token_log_probs) for h in beside
            ], (bundle, beam)


def test_without_the_rewrite_the_int8_bundle_moves(monkeypatch):
    """The failure the rewrite fixes, so that the test above could fail."""
    b = load("en-es/8", rewrite=False, monkeypatch=monkeypatch)
    source, partner = (b.src_tokenizer.encode(t) for t in (MOVED, " ".join(TEST[:3])))
    options = dataclasses.replace(b.decoding, return_token_scores=True)
    (alone,) = decode(b.model, [source], options=options, special=b.special)
    beside = decode(b.model, [source, partner], options=options, special=b.special)[0]
    assert alone[0].tokens == beside[0].tokens and alone[0].score != beside[0].score


@pytest.mark.parametrize(("bundle", "sums"), BUNDLES)
def test_the_rewrite_changes_nothing_but_the_order_of_sums(bundle, sums, monkeypatch):
    options_of = lambda b: dataclasses.replace(b.decoding, beam_size=4, n_best=2)  # noqa: E731
    rewritten = load(bundle)
    got = decode(
        rewritten.model,
        [rewritten.src_tokenizer.encode(t) for t in TEST[:30]],
        options=options_of(rewritten),
        special=rewritten.special,
    )
    plain = load(bundle, rewrite=False, monkeypatch=monkeypatch)
    want = decode(
        plain.model,
        [plain.src_tokenizer.encode(t) for t in TEST[:30]],
        options=options_of(plain),
        special=plain.special,
    )
    for g, w in zip(got, want, strict=True):
        assert [h.tokens for h in g] == [h.tokens for h in w]
        assert np.allclose([h.score for h in g], [h.score for h in w], atol=1e-5)


def _graph(nodes, inputs, initializers=(), opset=17) -> bytes:
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", inputs, [out], initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model.SerializeToString()


def _input(name: str, rank: int):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [None] * rank)


def _axes(name: str, value: int):
    return helper.make_tensor(name, TensorProto.INT64, [1], [value])


def test_graphs_without_the_patterns_are_left_as_they_are():
    # a one-column product by a constant: a weight, not the source
    weight = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], [1.0] * 6)
    by_weight = _graph(
        [
            helper.make_node("Unsqueeze", ["q", "ax"], ["u"]),
            helper.make_node("MatMul", ["w", "u"], ["out"]),
        ],
        [_input("q", 2)],
        [weight, _axes("ax", -1)],
    )
    # an Unsqueeze of something other than the attention, on another axis
    other = _graph(
        [
            helper.make_node("Unsqueeze", ["x", "ax"], ["u"]),
            helper.make_node("MatMul", ["u", "m"], ["out"]),
        ],
        [_input("x", 2), _input("m", 3)],
        [_axes("ax", 1)],
    )
    for data in (by_weight, other, b"not an onnx model", b""):
        assert poolwidth.width_invariant(data) == (data, 0)


def test_the_context_pattern_is_found_however_its_axes_are_given():
    for axes in (1, -2):
        data = _graph(
            [
                helper.make_node("Constant", [], ["ax"], value=_axes("v", axes)),
                helper.make_node("Unsqueeze", ["attention", "ax"], ["u"]),
                helper.make_node("MatMul", ["u", "memory"], ["out"]),
            ],
            [_input("attention", 2), _input("memory", 3)],
        )
        rewritten, count = poolwidth.width_invariant(data)
        assert count == 1
        ops = [n.op_type for n in onnx.load_from_string(rewritten).graph.node]
        assert ops == ["Constant", "Unsqueeze", "Concat", "MatMul", "Slice"]
    # opset 12: Unsqueeze's axes were an attribute; left alone
    old = _graph(
        [
            helper.make_node("Unsqueeze", ["attention"], ["u"], axes=[1]),
            helper.make_node("MatMul", ["u", "memory"], ["out"]),
        ],
        [_input("attention", 2), _input("memory", 3)],
        opset=12,
    )
    assert poolwidth.width_invariant(old) == (old, 0)


def _run(data: bytes, feeds: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _scores_graph(query_rank: int, axes: int, keys_rank: int) -> bytes:
    keys = helper.make_tensor_value_info("keys", TensorProto.FLOAT, [None] * keys_rank)
    query = _input("query", query_rank)
    return _graph(
        [
            helper.make_node("Unsqueeze", ["query", "ax"], ["u"]),
            helper.make_node("MatMul", ["keys", "u"], ["out"]),
        ],
        [keys, query],
        [_axes("ax", axes)],
    )


@pytest.mark.parametrize(
    ("query_rank", "axes", "keys_rank", "rewritten"),
    [
        (2, -1, 3, 1),  # Luong's dot and general scores: (rows, S, K) x (rows, K, 1)
        (3, -1, 4, 1),  # another batch axis: -1 is the last whatever the rank
        (1, -1, 2, 1),  # a shared query vector
        (3, 2, 4, 0),  # 2 is the last axis only for a query of rank 2
        (2, -1, 1, 0),  # a vector of keys: MatMul drops its prepended axis again
    ],
)
def test_the_scores_rewrite_is_exact_where_it_applies(query_rank, axes, keys_rank, rewritten):
    """helper-82 found shapes the first version rewrote into others: each shape here is
    either left alone or computes what the MatMul did, shape and values."""
    data = _scores_graph(query_rank, axes, keys_rank)
    new, count = poolwidth.width_invariant(data)
    assert count == rewritten
    rng = np.random.default_rng(0)
    k = 5
    keys = rng.standard_normal((3, 2, 4, k)[-keys_rank:] if keys_rank > 1 else (k,))
    query = rng.standard_normal((3, 2, k)[-query_rank:])
    feeds = {"keys": keys.astype(np.float32), "query": query.astype(np.float32)}
    if rewritten:
        want, got = _run(data, feeds), _run(new, feeds)
        assert got.shape == want.shape and np.allclose(got, want, atol=1e-5)


def test_weights_and_ensemble_members(tmp_path):
    """A column product by a weight, dequantized first, is left alone (no scores over
    the source, and a weight-sized product); an ensemble member's attention is found."""
    scale = helper.make_tensor("scale", TensorProto.FLOAT, [], [0.5])
    weight = helper.make_tensor("w8", TensorProto.INT8, [2, 3], [1] * 6)
    dequantized = _graph(
        [
            helper.make_node("DequantizeLinear", ["w8", "scale"], ["w"]),
            helper.make_node("Unsqueeze", ["q", "ax"], ["u"]),
            helper.make_node("MatMul", ["w", "u"], ["out"]),
        ],
        [_input("q", 2)],
        [weight, scale, _axes("ax", -1)],
    )
    assert poolwidth.width_invariant(dequantized) == (dequantized, 0)
    member = _graph(
        [
            helper.make_node("Unsqueeze", ["m1/attention", "ax"], ["u"]),
            helper.make_node("MatMul", ["u", "memory"], ["out"]),
        ],
        [_input("m1/attention", 2), _input("memory", 3)],
        [_axes("ax", 1)],
    )
    assert poolwidth.width_invariant(member)[1] == 1

"""Several greedy decoder steps in one call (:mod:`service.greedysteps`): the composed
graph gives bit for bit what as many single steps give, for every model variant, every
EOS rule and in any batch; the server answers and streams the same with it; a decoder
that cannot be composed is refused by name and served one step a call."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from models.options import DecodeOptions
from models.scoring import Eos, eos_codes, restrict
from nmt_api.nmt.v1 import translator_pb2 as pb
from service import greedysteps
from service import onnx_graph_pb2 as onnx_pb
from service.bundle import load_bundle
from service.decoding import SpecialIds, candidates, pad_batch
from service.loop import decode
from service.ranking import greedy_pick
from service.sessions import HOST_GREEDY_STEPS, MAX_GREEDY_STEPS, RuntimeConfig
from service.strategies import Greedy
from tests.service.server_fixtures import ServerFactory, build_tiny_bundle
from tests.service.server_helpers import (
    TIMEOUT,
    assert_same_nbest,
    proto_options,
    served,
    stub_for,
)

VARIANTS = {
    "gru-additive": None,  # the session's tiny bundle
    "coverage-lstm-concat-luong": dict(
        coverage=True, rnn_type="lstm", attention="concat", placement="luong"
    ),
}
OPTIONS = [
    DecodeOptions(max_length=40),
    DecodeOptions(min_length=7, max_length=11),  # EOS blocked, then forced mid-call
    DecodeOptions(max_length_ratio=0.5, max_length_offset=1),
    DecodeOptions(search="eole", max_length=6),  # the EOS forced at the limit not scored
]


@pytest.fixture(scope="module", params=list(VARIANTS))
def bundle_dir(request, tiny_bundle, tmp_path_factory):
    if VARIANTS[request.param] is None:
        return tiny_bundle.bundle_dir
    made = build_tiny_bundle(
        tmp_path_factory.mktemp(request.param), request.param, **VARIANTS[request.param]
    )
    return made.bundle_dir


def load(bundle_dir, steps: int):
    return load_bundle(
        bundle_dir, RuntimeConfig(providers=("cpu",), intra_op_threads=1, greedy_steps=steps)
    )


def nbest(bundle, texts, options, batch_size=4):
    ids = bundle.src_tokenizer.encode_batch(texts)
    out = decode(bundle.model, ids, options=options, special=bundle.special, batch_size=batch_size)
    return [[(h.tokens, h.score, h.log_prob) for h in hyps] for hyps in out]


def assert_alike(got, want) -> None:
    """The same tokens, scores within the batch-invariance tolerance: calls of several
    steps admit sentences and narrow the memory pool only between calls, so a row's
    neighbours and padding differ from those of single steps (see
    tests/reliability/test_batch_invariance.py)."""
    assert [[h[0] for h in hyps] for hyps in got] == [[h[0] for h in hyps] for hyps in want]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose([h[1:] for h in g], [h[1:] for h in w], rtol=0, atol=1e-5)


def step_inputs(bundle, texts):
    ids, lengths = pad_batch(bundle.src_tokenizer.encode_batch(texts), bundle.special.pad)
    enc = bundle.model.encode(ids, lengths)
    rows = np.arange(len(texts), dtype=np.int64)
    return enc, {
        "prev_tokens": np.full(len(texts), bundle.special.bos, dtype=np.int64),
        "parent_rows": rows,
        "row_sentence": rows,
        "memory": enc.memory,
        "keys": enc.keys,
        "mask": enc.mask,
    }


@pytest.mark.parametrize("steps", [2, 5])
def test_a_call_of_several_steps_is_bit_for_bit_those_steps(bundle_dir, tiny_bundle, steps):
    """The same rows through the composed graph and through single steps with the
    host's choice (candidates, restrict, greedy_pick): identical tokens, log-probs,
    attention and states."""
    bundle = load(bundle_dir, steps)
    texts = list(tiny_bundle.sentences[:6])
    enc, feeds = step_inputs(bundle, texts)
    n = len(texts)
    step0 = np.array([0, 1, 2, 3, 0, 5])
    limits, min_lengths = np.array([9, 3, 4, 9, 9, 9]), np.array([3, 0, 0, 6, 0, 0])
    eos_mask = greedysteps.eos_masks(step0, limits, min_lengths, steps)
    out = bundle.model.step(**feeds, states=enc.states, top_k=Greedy.K, eos_mask=eos_mask)
    states, prev = enc.states, feeds["prev_tokens"]
    for j in range(steps):
        single = bundle.model.step(**(feeds | {"prev_tokens": prev}), states=states, top_k=Greedy.K)
        values, ids = candidates(
            single.topk_values, single.topk_ids, single.eos_values, bundle.special
        )
        restrict(values, eos_codes(step0 + j, limits, min_lengths))
        prev, log_probs = greedy_pick(values, ids)
        np.testing.assert_array_equal(out.tokens[:, j], prev)
        np.testing.assert_array_equal(out.log_probs[:, j], log_probs)
        np.testing.assert_array_equal(out.attention[:, j], single.attention)
        states = single.states
        feeds["parent_rows"] = np.arange(n, dtype=np.int64)
    for a, b in zip(out.states, states, strict=True):
        np.testing.assert_array_equal(a, b)
    assert (out.tokens == bundle.special.eos).any()  # the forced EOS of rows 1 and 2


@pytest.mark.parametrize("steps", [2, 5])
@pytest.mark.parametrize("options", OPTIONS, ids=["plain", "min-max", "ratio", "eole"])
def test_steps_in_one_call_equal_single_steps(bundle_dir, tiny_bundle, steps, options):
    single, several = load(bundle_dir, 1), load(bundle_dir, steps)
    assert several.model.greedy_steps == steps and single.model.greedy_steps == 1
    texts = list(tiny_bundle.sentences[:12])
    want = nbest(single, texts, options)
    got = nbest(several, texts, options)
    assert_alike(got, want)
    # and it did run several steps a call
    calls = several.model.stats.decoder_calls
    assert calls < single.model.stats.decoder_calls
    assert several.model.stats.decoder_rows >= single.model.stats.decoder_rows


def test_a_mixed_batch_steps_one_at_a_time_and_answers_alike(tiny_bundle):
    """A beam sentence among greedy ones: every step is a single one, and each greedy
    sentence's answer is the one it gets alone (several steps a call)."""
    texts = list(tiny_bundle.sentences[:8])
    options = [DecodeOptions(max_length=30)] * 8
    options[3] = DecodeOptions(beam_size=3, n_best=2, max_length=30)
    several = load(tiny_bundle.bundle_dir, 4)
    mixed = nbest(several, texts, options, batch_size=8)
    alone = [nbest(several, [t], o)[0] for t, o in zip(texts, options, strict=True)]
    assert_alike(mixed, alone)


def test_eos_masks_block_what_restrict_blocks():
    rng = np.random.default_rng(0)
    steps = rng.integers(0, 12, size=50)
    limits = rng.integers(1, 14, size=50)
    min_lengths = rng.integers(0, 8, size=50)
    count = 6
    mask = greedysteps.eos_masks(steps, limits, min_lengths, count)
    assert mask.shape == (50, count, Greedy.K + 1) and mask.dtype == bool
    for j in range(count):
        values = np.zeros((50, Greedy.K + 1), dtype=np.float32)
        codes = [
            Eos.FORCED if s + j >= lim - 1 else Eos.BLOCKED if s + j < m else Eos.ALLOWED
            for s, lim, m in zip(steps, limits, min_lengths, strict=True)
        ]
        restrict(values, codes)
        np.testing.assert_array_equal(np.isneginf(values), mask[:, j])
    assert mask[:, :, -1].any() and mask[:, :, 0].any()  # both rules occur here


def decoder_bytes(bundle_dir) -> bytes:
    return (bundle_dir / "decoder.onnx").read_bytes()


def compose(data: bytes, steps: int = 3) -> bytes:
    return greedysteps.compose(data, steps, ("hidden",), SpecialIds(0, 2, 3, 1), 120)


def test_the_composed_graph_is_valid_onnx(tiny_bundle):
    import onnx  # a dev dependency; the service needs only protobuf

    model = onnx.load_from_string(compose(decoder_bytes(tiny_bundle.bundle_dir), 3))
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.output] == greedysteps.outputs(("hidden",))
    assert "top_k" not in [i.name for i in model.graph.input]
    # what compose adds reads no shape (CUDA graphs capture only nodes on the device):
    # the copies' parent rows come in as own_rows
    added = {n.op_type for n in model.graph.node if n.name.startswith("greedy_steps_")}
    assert added and not added & {"Shape", "Range", "Expand", "ConstantOfShape", "Size"}


def edited(data: bytes, edit) -> bytes:
    model = onnx_pb.ModelProto()
    model.ParseFromString(data)
    edit(model)
    return model.SerializeToString()


def _rename_output(model):
    model.graph.output[0].name = "scores"


def _old_opset(model):
    model.opset_import[0].version = 12


def _subgraph(model):
    node = model.graph.node.add(op_type="If", name="branch", input=["c"], output=["d"])
    node.attribute.add(name="then_branch", type=onnx_pb.AttributeProto.GRAPH)


def _half_outputs(model):
    model.graph.output[0].type.tensor_type.elem_type = onnx_pb.TensorProto.FLOAT16


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_rename_output, "lacks the contract's topk_log_probs"),
        (_old_opset, "opset is 12; composing steps needs 13"),
        (_subgraph, r"has subgraphs \(If\)"),
        (_half_outputs, "topk_log_probs are not float32"),
    ],
    ids=["missing-output", "old-opset", "subgraph", "fp16-outputs"],
)
def test_compose_refuses_a_decoder_it_cannot_copy(tiny_bundle, edit, message):
    data = edited(decoder_bytes(tiny_bundle.bundle_dir), edit)
    with pytest.raises(greedysteps.ComposeError, match=message):
        compose(data)


def test_compose_refuses_fewer_than_two_steps(tiny_bundle):
    with pytest.raises(greedysteps.ComposeError, match="at least 2"):
        compose(decoder_bytes(tiny_bundle.bundle_dir), 1)


def test_greedy_steps_config_is_checked():
    with pytest.raises(ValueError, match=f"greedy_steps must be 0..{MAX_GREEDY_STEPS}"):
        RuntimeConfig(greedy_steps=-1)
    with pytest.raises(ValueError, match="greedy_steps"):
        RuntimeConfig(greedy_steps=MAX_GREEDY_STEPS + 1)


@pytest.mark.parametrize(
    ("steps", "io_binding", "runs"),
    [(0, "off", HOST_GREEDY_STEPS), (0, "on", 1), (3, "on", 3), (1, "off", 1)],
)
def test_auto_greedy_steps_are_several_on_host_arrays_and_one_under_io_binding(
    tiny_bundle, steps, io_binding, runs
):
    """0 (auto, the default) runs HOST_GREEDY_STEPS on host arrays and one step a call
    with IO binding (not measured on a GPU yet); a number asks for that many either way."""
    assert RuntimeConfig().greedy_steps == 0
    config = RuntimeConfig(("cpu",), intra_op_threads=1, greedy_steps=steps, io_binding=io_binding)
    model = load_bundle(tiny_bundle.bundle_dir, config).model
    assert model.greedy_steps == runs
    assert (model._greedy is not None) == (runs > 1)


def test_a_decoder_that_cannot_be_composed_is_served_one_step_a_call(
    tiny_bundle, monkeypatch, caplog
):
    def refuse(*args, **kwargs):
        raise greedysteps.ComposeError("the decoder has subgraphs (Loop)")

    monkeypatch.setattr(greedysteps, "compose", refuse)
    caplog.set_level(logging.WARNING, logger="service.runtime")
    bundle = load(tiny_bundle.bundle_dir, 4)
    assert bundle.model.greedy_steps == 1
    assert "greedy steps: one a decoder call (the decoder has subgraphs (Loop))" in caplog.text
    texts = list(tiny_bundle.sentences[:4])
    assert nbest(bundle, texts, DecodeOptions()) == nbest(
        load(tiny_bundle.bundle_dir, 1), texts, DecodeOptions()
    )  # the same path: exactly


@pytest.fixture(scope="module")
def servers(tiny_bundle):
    """Two real servers of the tiny bundle: one step a call, and four."""
    from service.sessions import RuntimeConfig as Runtime

    factory = ServerFactory(tiny_bundle.repo)
    made = {}
    for steps in (1, 4):
        runtime = Runtime(providers=("cpu",), intra_op_threads=1, greedy_steps=steps)
        made[steps] = factory(server={"runtime": runtime})
    yield made
    factory.close()


def test_the_server_answers_and_streams_alike_with_several_steps_a_call(servers, tiny_bundle):
    options = proto_options(beam=1, min_length=20, max_length=30)  # 20 tokens or more
    texts = list(tiny_bundle.sentences[:6])
    answers, streams = {}, {}
    for steps, server in servers.items():
        channel, stub = stub_for(server.port)
        with channel:
            answers[steps] = stub.Translate(
                pb.TranslateRequest(texts=texts, options=options), timeout=TIMEOUT
            )
            streams[steps] = list(
                stub.TranslateStream(
                    pb.TranslateStreamRequest(text=texts[1], options=options), timeout=TIMEOUT
                )
            )
    assert_same_nbest(served(answers[4]), served(answers[1]), atol=1e-5)
    one, four = streams[1], streams[4]
    assert four[-1].final and four[-1].text == one[-1].text
    assert "".join(m.delta for m in four) == four[-1].text
    # the tokens come in bursts of up to four: at most about a quarter as many messages
    assert len(one) >= 20
    assert 5 <= len(four) <= (len(one) + 3) // 4 + 1
    assert servers[4].engines["tiny"].bundle.model.greedy_steps == 4


def test_the_committed_onnx_graph_module_is_what_protoc_generates(tmp_path):
    """``service/onnx_graph_pb2.py`` is generated from ``protos/onnx_graph/`` (onnx.proto
    under the package ``nmt_onnx``), never edited by hand."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proto = root / "protos" / "onnx_graph" / "onnx_graph.proto"
    assert "package nmt_onnx;" in proto.read_text()
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{proto.parent}",
         f"--python_out={tmp_path}", str(proto)],
        check=True,
    )  # fmt: skip
    fresh = (tmp_path / "onnx_graph_pb2.py").read_text()
    assert fresh == (root / "service" / "onnx_graph_pb2.py").read_text(), (
        "regenerate service/onnx_graph_pb2.py (see protos/onnx_graph/onnx_graph.proto)"
    )


# -- the choice's corner cases, on a decoder whose outputs are a table of its input token --

TABLE_SPECIAL = SpecialIds(pad=0, bos=1, eos=2, unk=3)
TABLE_VOCAB = 10


def table_decoder(values: np.ndarray, ids: np.ndarray, eos: np.ndarray) -> bytes:
    """A one-step decoder (the contract's names, nodes left unnamed) whose top-k values,
    ids and EOS log-prob are row ``prev_tokens`` of ``values``/``ids``/``eos``."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper

    nodes = [
        h.make_node("Gather", ["table_values", "prev_tokens"], ["topk_log_probs"], axis=0),
        h.make_node("Gather", ["table_ids", "prev_tokens"], ["topk_ids"], axis=0),
        h.make_node("Gather", ["table_eos", "prev_tokens"], ["eos_log_probs"], axis=0),
        h.make_node("Cast", ["src_mask"], ["mask_float"], to=T.FLOAT),
        h.make_node("Gather", ["mask_float", "row_sentence"], ["attention"], axis=0),
        h.make_node("Gather", ["hidden", "parent_rows"], ["kept"], axis=0),
        h.make_node("Add", ["kept", "one"], ["hidden_out"]),
    ]
    weights = [
        numpy_helper.from_array(values.astype(np.float32), "table_values"),
        numpy_helper.from_array(ids.astype(np.int64), "table_ids"),
        numpy_helper.from_array(eos.astype(np.float32), "table_eos"),
        numpy_helper.from_array(np.array(1, np.float32), "one"),
    ]
    value = h.make_tensor_value_info
    inputs = [
        value("prev_tokens", T.INT64, ["rows"]),
        value("parent_rows", T.INT64, ["rows"]),
        value("row_sentence", T.INT64, ["rows"]),
        value("memory", T.FLOAT, ["sentences", "src_len", 2]),
        value("keys", T.FLOAT, ["sentences", "src_len", 2]),
        value("src_mask", T.BOOL, ["sentences", "src_len"]),
        value("top_k", T.INT64, [1]),
        value("hidden", T.FLOAT, ["prev_rows", 2]),
    ]
    outputs = [
        value("topk_log_probs", T.FLOAT, ["rows", Greedy.K]),
        value("topk_ids", T.INT64, ["rows", Greedy.K]),
        value("eos_log_probs", T.FLOAT, ["rows"]),
        value("attention", T.FLOAT, ["rows", "src_len"]),
        value("hidden_out", T.FLOAT, ["rows", 2]),
    ]
    graph = h.make_graph(nodes, "table", inputs, outputs, weights)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _table(rows: dict[int, tuple[list[float], list[int], float]]):
    values = np.tile(np.array([-1.0, -2.0, -3.0]), (TABLE_VOCAB, 1))
    ids = np.tile(np.array([5, 6, 7]), (TABLE_VOCAB, 1))
    eos = np.full(TABLE_VOCAB, -5.0)
    for token, (v, i, e) in rows.items():
        values[token], ids[token], eos[token] = v, i, e
    return values, ids, eos


NAN = float("nan")
CORNERS = {
    # first token (after BOS) -> the row the table gives
    "ties": {1: ([-1.0, -1.0, -1.0], [5, 6, 7], -1.0)},
    "pad-and-bos-in-top-k": {1: ([-0.1, -0.2, -3.0], [0, 1, 7], -5.0)},
    "nan-after-a-number": {1: ([-1.0, NAN, -0.5], [5, 6, 7], -5.0)},
    "nan-first": {1: ([NAN, -1.0, -0.5], [5, 6, 7], -5.0)},
    "nan-eos": {1: ([-1.0, -2.0, -3.0], [5, 6, 7], NAN)},
    "all-minus-inf": {1: ([-np.inf] * 3, [5, 6, 7], -np.inf)},
}


@pytest.mark.parametrize("rule", ["allowed", "blocked", "forced"])
@pytest.mark.parametrize("corner", list(CORNERS))
def test_the_graphs_choice_is_the_hosts_in_every_corner(corner, rule):
    """Ties, pad/bos leaking into the top-k, NaN log-probs (a broken model), nothing
    but -inf; with EOS allowed, blocked and forced: the composed graph chooses what
    candidates + restrict + greedy_pick choose, token and log-prob."""
    import onnxruntime as ort

    steps = 3
    one = table_decoder(*_table(CORNERS[corner]))
    several = greedysteps.compose(one, steps, ("hidden",), TABLE_SPECIAL, TABLE_VOCAB)
    single_session, steps_session = ort.InferenceSession(one), ort.InferenceSession(several)
    feeds = {
        "prev_tokens": np.array([TABLE_SPECIAL.bos, 4], dtype=np.int64),
        "parent_rows": np.arange(2),
        "row_sentence": np.zeros(2, dtype=np.int64),
        "memory": np.zeros((1, 3, 2), np.float32),
        "keys": np.zeros((1, 3, 2), np.float32),
        "src_mask": np.ones((1, 3), bool),
        "hidden": np.zeros((2, 2), np.float32),
    }
    step0 = np.array([0, 0])
    limits = np.array({"allowed": [9, 9], "blocked": [9, 9], "forced": [1, 2]}[rule])
    min_lengths = np.array({"allowed": [0, 0], "blocked": [5, 5], "forced": [0, 0]}[rule])
    mask = greedysteps.eos_masks(step0, limits, min_lengths, steps)
    own_rows = {"eos_mask": mask, "own_rows": np.arange(2)}
    tokens, log_probs = steps_session.run(["tokens", "log_probs"], feeds | own_rows)
    prev = feeds["prev_tokens"]
    for j in range(steps):
        values, ids, eos = single_session.run(
            ["topk_log_probs", "topk_ids", "eos_log_probs"],
            feeds | {"prev_tokens": prev, "top_k": np.array([Greedy.K])},
        )
        values, ids = candidates(values, ids, eos, TABLE_SPECIAL)
        restrict(values, eos_codes(step0 + j, limits, min_lengths))
        prev, chosen = greedy_pick(values, ids)
        np.testing.assert_array_equal(tokens[:, j], prev, err_msg=f"step {j}")
        np.testing.assert_array_equal(log_probs[:, j], chosen, err_msg=f"step {j}")

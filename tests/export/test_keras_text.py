"""TensorFlow's newer tutorial (TextVectorization, MultiHeadAttention), as
``tests/fixtures/keras/text_tutorial`` holds it (trained, saved and decoded by TensorFlow
2.15 + tensorflow-text itself; no tensorflow import here): ``model.save_weights`` ->
bundle -> the service's decode loop and its gRPC server, against the tutorial's own
``translate`` and teacher-forced log-probs; and the SavedModel the tutorial ends with
(``tf.saved_model.save``), converted with the vocabularies its graph holds."""

from __future__ import annotations

import dataclasses
import json
import lzma
import random
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from export.convert import main
from export.keras import KerasError
from export.keras_text import keras_text_user_model
from export.tf_checkpoint import CheckpointError, _fields, read_checkpoint, read_index
from export.tf_saved_model import SavedModelGraph, named_variables
from service.bundle import load_bundle
from service.loop import decode
from service.sessions import RuntimeConfig
from tests.export.helpers import forced_score_errors, served_with_attention, write_tf_score_pairs

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "keras" / "text_tutorial"


def _lines(kind: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURE / f"{kind}.json").read_text().splitlines()]


def _argv(model: Path, out: Path, *extra: str) -> list[str]:
    return ["keras-text", str(model / "weights"),
            "--source-vocabulary", str(model / "context_vocabulary.json"),
            "--target-vocabulary", str(model / "target_vocabulary.json"),
            "--out", str(out), *extra]  # fmt: skip


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = tmp_path_factory.mktemp("keras-text") / "m" / "1"
    src = (FIXTURE.parents[3] / "models" / "sample" / "sample.en").resolve()
    assert main(_argv(FIXTURE, out, "--parity-src", str(src), "--beam-sentences", "20")) == 0
    return out


def _unpacked(saved: Path, model: Path) -> Path:
    """A fixture's SavedModel ``saved`` copied to ``model`` as TensorFlow wrote it: its
    ``saved_model.pb`` decompressed (the fixture keeps it xz-compressed)."""
    shutil.copytree(saved, model, ignore=shutil.ignore_patterns("*.xz"))
    with lzma.open(saved / "saved_model.pb.xz") as packed:
        (model / "saved_model.pb").write_bytes(packed.read())
    return model


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory) -> Path:
    """The fixture's SavedModel as TensorFlow wrote it."""
    return _unpacked(FIXTURE / "saved_model", tmp_path_factory.mktemp("saved") / "translator")


@pytest.fixture(scope="module")
def converted_saved_model(saved_model, tmp_path_factory):
    """``nmt-convert keras-text translator/``: no vocabulary files."""
    out = tmp_path_factory.mktemp("keras-text-saved") / "m" / "1"
    assert main(["keras-text", str(saved_model), "--out", str(out)]) == 0
    return out


KERAS3 = FIXTURE.parent / "text_tutorial_keras3"


@pytest.fixture(scope="module")
def keras3_saved_model(tmp_path_factory) -> Path:
    """The same tutorial trained and saved by TensorFlow 2.18 with Keras 3."""
    return _unpacked(KERAS3 / "saved_model", tmp_path_factory.mktemp("keras3") / "translator")


def _bundle(out: Path):
    return load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))


@pytest.mark.parametrize(
    ("form", "path"), [("weights", "weights"), ("saved_model", "saved_model/variables/variables")]
)
def test_the_reader_reads_both_saved_forms_as_tensorflow_does(form, path):
    """``model.save_weights`` and ``tf.saved_model.save`` (its variables) of one model."""
    _, entries, _ = read_index(FIXTURE / path)
    truth = json.loads((FIXTURE / f"variables_{form}.json").read_text())
    assert {n: list(e.shape) for n, e in entries.items()} == {v["name"]: v["shape"] for v in truth}
    tensors = read_checkpoint(FIXTURE / path)
    want = np.load(FIXTURE / f"values_{form}.npz")
    assert len(want.files) > 20
    for key in want.files:
        assert np.array_equal(tensors[key.replace("|", "/")], want[key]), key


@pytest.mark.parametrize("form", ["weights", "saved_model"])
def test_greedy_is_the_tutorials_token_for_token(request, form):
    """All 330 sources (trained on, new, with unknown words) tokenised to the ids
    ``tf_lower_and_split_punct`` + TextVectorization gave, and translated to the tokens
    ``translate`` produced, with their log-probs; from either saved form (TensorFlow's
    SavedModel gave ``translate``'s text for the 20 it checked: saved_model_check.json)."""
    name = "converted" if form == "weights" else "converted_saved_model"
    bundle = _bundle(request.getfixturevalue(name))
    rows = _lines("greedy")
    sources, same, gap = _greedy_against_tensorflow(bundle, rows)
    assert sum(bundle.source_unk_id in s for s in sources) >= 10
    assert sum(same) == len(rows) == 330, [i for i, s in enumerate(same) if not s][:10]
    assert gap < 1e-4


def _greedy_against_tensorflow(bundle, rows: list[dict]) -> tuple[list, list[bool], float]:
    """``bundle`` decoding the sources of TensorFlow's ``translate`` ``rows`` (their ids
    checked first): the sources' ids, whether each row's tokens are TensorFlow's, and the
    largest per-token log-prob gap over the rows that are."""
    sources = [bundle.src_tokenizer.encode(r["source"]) for r in rows]
    assert sources == [r["context_ids"] for r in rows]
    options = dataclasses.replace(bundle.decoding, return_token_scores=True)
    got = decode(bundle.model, sources, options=options, special=bundle.special)
    eos = bundle.special.eos
    same = [list(h.tokens) + [eos] == r["ids"] for (h,), r in zip(got, rows, strict=True)]
    gaps = [abs(g - w) for ((h,), r), ok in zip(zip(got, rows, strict=True), same, strict=True)
            if ok for g, w in zip(h.token_log_probs, r["log_probs"], strict=True)]  # fmt: skip
    return sources, same, max(gaps, default=float("inf"))


def test_scores_of_given_targets_are_tensorflows(converted, tmp_path):
    write_tf_score_pairs(_lines("score"), tmp_path / "score.json")
    tokens, totals = forced_score_errors(converted, tmp_path / "score.json")
    assert len(totals) == 40 and len(tokens) > 300
    assert tokens.max() < 1e-4 and totals.max() < 1e-4


def test_served_with_the_tutorials_attention(converted, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(converted, repo / "text" / "1")
    rows = _lines("greedy")[:6]
    served = served_with_attention(repo, [r["source"] for r in rows])
    for r, (hyp, att) in zip(rows, served, strict=True):
        assert list(hyp.tokens) == r["tokens"][:-1]
        # its words; the punctuation glued back on (translate joins every token with spaces)
        assert hyp.text.replace(" ", "") == r["text"].replace(" ", "") and hyp.text
        assert list(hyp.attention.source_tokens) == r["standardized"].split()
        assert np.abs(att - np.array(r["attention"])).max() < 1e-4


def _write(name: str, value) -> object:
    def edit(model: Path) -> None:
        (model / name).write_text(json.dumps(value))

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_write("context_vocabulary.json", {"a": 1}), "expected the JSON list get_vocabulary"),
        (_write("target_vocabulary.json", ["a", "b"]), "not a TextVectorization vocabulary"),
        (
            lambda m: shutil.copy(m / "target_vocabulary.json", m / "context_vocabulary.json"),
            "the source embeddings have 1130 rows but",
        ),
        (
            lambda m: [shutil.rmtree(m / "weights"), shutil.copytree(
                FIXTURE.parent / "tutorial" / "training_checkpoints", m / "weights")],
            "convert it with nmt-convert keras",
        ),
    ],
    ids=["not-list", "not-vocabulary", "other-vocabulary", "older-tutorial"],
)  # fmt: skip
def test_what_is_not_the_tutorials_is_refused_in_one_line(tmp_path, capsys, edit, message):
    model = tmp_path / "model"
    model.mkdir()
    for name in ("weights", "context_vocabulary.json", "target_vocabulary.json"):
        copy = shutil.copytree if (FIXTURE / name).is_dir() else shutil.copy
        copy(FIXTURE / name, model / name)
    edit(model)
    assert main(_argv(model, tmp_path / "o" / "1")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("inside", ["variables", "variables/variables"])
def test_a_path_inside_the_saved_model_is_the_saved_model(saved_model, inside):
    user = keras_text_user_model(saved_model / inside)
    assert user.origin["target_vocabulary"] == str(saved_model / "saved_model.pb")


def test_the_saved_models_bundle_is_the_save_weights_bundle(converted, converted_saved_model):
    """The two saved forms of one model convert to the same graphs and vocabularies, so
    what the tests check on one (Score, attention, the server) holds for the other."""
    for name in ("encoder.onnx", "decoder.onnx", "source.vocab.json", "target.vocab.json"):
        assert (converted / name).read_bytes() == (converted_saved_model / name).read_bytes()
    origin = json.loads((converted_saved_model / "manifest.json").read_text())
    assert "saved_model.pb" in json.dumps(origin)


@pytest.mark.parametrize(
    ("table", "vocabulary"),
    [
        ("model/encoder/text_processor/_lookup_layer/lookup_table", "context"),
        ("model/decoder/text_processor/_lookup_layer/lookup_table", "target"),
        ("model/decoder/word_to_id/lookup_table", "target"),
        ("model/decoder/id_to_word/lookup_table", "target"),
    ],
)
def test_the_saved_models_tables_hold_get_vocabulary(saved_model, table, vocabulary):
    """Each lookup table of the graph, read without TensorFlow, lists what TensorFlow's
    ``get_vocabulary()`` returned, from id 2 (0 and 1, the mask and [UNK], are implicit)."""
    words = SavedModelGraph(saved_model).table(table)
    want = json.loads((FIXTURE / f"{vocabulary}_vocabulary.json").read_text())
    assert len(words) == len(want) - 2 > 1000
    assert sorted(words, key=words.get) == want[2:]
    assert sorted(words.values()) == list(range(2, len(want)))
    assert SavedModelGraph(saved_model).table("model/encoder/embedding") is None


@pytest.mark.parametrize(
    ("form", "path"),
    [("weights", "weights/ckpt"), ("saved_model", "saved_model/variables/variables")],
)
def test_variables_are_named_by_their_layer_whatever_the_save(form, path):
    """The SavedModel saves its variables as ``model/variables/<i>``: walking the object
    graph names each by its layer path, the path TensorFlow's own object graph gives (the
    fixture's ``layer_path``), and both saves hold the same numbers under those names."""
    named = named_variables(FIXTURE / path)
    truth = json.loads((FIXTURE / f"variables_{form}.json").read_text())
    tensors = read_checkpoint(FIXTURE / path)
    expect = {v["layer_path"].removesuffix("/VARIABLE_VALUE"): v["name"] for v in truth
              if v["name"].endswith("VARIABLE_VALUE") and "/optimizer/" not in f"/{v['name']}"
              and "keras_api" not in (v["layer_path"] or "keras_api")}  # fmt: skip
    assert len(named) == len(expect) == 23
    for layer_path, key in expect.items():
        assert np.array_equal(named[layer_path], tensors[key]), layer_path
    weights = named_variables(FIXTURE / "weights/ckpt")
    for layer_path, value in named.items():
        assert np.array_equal(value, weights[layer_path.removeprefix("model/")]), layer_path


def _saved_copy(saved_model: Path, tmp_path: Path) -> Path:
    model = tmp_path / "translator"
    shutil.copytree(saved_model, model)
    return model


def test_a_vocabulary_given_beside_a_saved_model_must_be_its_own(saved_model, tmp_path):
    same = keras_text_user_model(saved_model, FIXTURE / "context_vocabulary.json")
    assert same.source.tokens == _bundle_vocab(FIXTURE / "context_vocabulary.json")
    with pytest.raises(KerasError, match="differs from the SavedModel.s at id 4 "):
        keras_text_user_model(saved_model, FIXTURE / "target_vocabulary.json")


def _bundle_vocab(path: Path) -> list[str]:
    return ["<pad>", *json.loads(path.read_text())[1:]]


def test_save_weights_without_vocabularies_says_what_to_give(tmp_path, capsys):
    assert main(["keras-text", str(FIXTURE / "weights"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no source vocabulary: model.save_weights does not save the vocabularies" in err
    assert "--source-vocabulary" in err and "SavedModel" in err


def test_a_saved_models_variables_alone_convert_with_the_vocabularies(converted, tmp_path):
    """``variables/`` without ``saved_model.pb`` (the fixture's, compressed): named by the
    object graph, with the JSON vocabularies."""
    out = tmp_path / "o" / "1"
    argv = _argv(FIXTURE, out)
    argv[1] = str(FIXTURE / "saved_model")
    assert main(argv) == 0
    assert (out / "decoder.onnx").read_bytes() == (converted / "decoder.onnx").read_bytes()


def test_a_saved_model_of_something_else_is_refused(saved_model, tmp_path, capsys):
    """A SavedModel whose encoder has no TextVectorization table at the tutorial's path."""
    model = _saved_copy(saved_model, tmp_path)
    pb = model / "saved_model.pb"
    pb.write_bytes(pb.read_bytes().replace(b"_lookup_layer", b"_lookup_lay3r"))
    assert main(["keras-text", str(model), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no source vocabulary (no lookup table at" in err, err
    # with the vocabularies given, those are the vocabularies: it converts
    argv = _argv(FIXTURE, tmp_path / "o2" / "1")
    argv[1] = str(model)
    assert main(argv) == 0


def test_a_damaged_saved_model_pb_is_refused_never_a_traceback(saved_model, tmp_path):
    """Truncations and flipped bytes where the reader looks (the graph's nodes at the
    start, the object graph at the end): each reads, or raises CheckpointError."""
    data = (saved_model / "saved_model.pb").read_bytes()
    (meta,) = [v for n, v in _fields(data) if n == 2]
    (objects,) = [v for n, v in _fields(meta) if n == 7]
    rng = random.Random(7)
    model = _saved_copy(saved_model, tmp_path)
    outcomes = {"read": 0, "refused": 0}
    for case in range(60):
        if case % 3 == 0:
            damaged = data[: rng.randrange(len(data))]
        else:
            start = rng.choice([0, len(data) - len(objects)])
            at = start + rng.randrange(min(200_000, len(objects)))
            damaged = data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :]
        (model / "saved_model.pb").write_bytes(damaged)
        try:
            graph = SavedModelGraph(model)
            for table in ("encoder/text_processor/_lookup_layer", "decoder/id_to_word"):
                graph.table(f"model/{table}/lookup_table")
            outcomes["read"] += 1
        except CheckpointError as exc:
            assert str(model / "saved_model.pb") in str(exc) or "model/" in str(exc)
            outcomes["refused"] += 1
    assert outcomes["refused"] >= 20 and sum(outcomes.values()) == 60, outcomes
    (model / "saved_model.pb").unlink()
    with pytest.raises(KerasError, match="no source vocabulary: model.save_weights"):
        keras_text_user_model(model)


def test_a_keras3_saved_model_translates_as_tensorflow_did(keras3_saved_model, tmp_path):
    """Keras 3 names an embedding's table ``_embeddings`` and kernels ``_kernel``, and keys
    the variables through the optimizer: the SavedModel of today's TensorFlow converts,
    its vocabularies from its graph, and decodes all 60 sources as TensorFlow did."""
    out = tmp_path / "k3" / "1"
    assert main(["keras-text", str(keras3_saved_model), "--out", str(out)]) == 0
    bundle = _bundle(out)
    rows = [json.loads(line) for line in (KERAS3 / "greedy.json").read_text().splitlines()]
    for side, tokenizer in (("context", bundle.src_tokenizer), ("target", bundle.tgt_tokenizer)):
        want = json.loads((KERAS3 / f"{side}_vocabulary.json").read_text())
        assert tokenizer.tokens[1:] == want[1:] and len(want) > 1000
    _, same, gap = _greedy_against_tensorflow(bundle, rows)
    assert all(same) and len(rows) == 60
    assert gap < 1e-4


def test_negative_integer_constants_are_read_as_tensorflow_writes_them():
    """``int64_val``/``int_val`` are two's complement varints: -1 is ten bytes of 0xff..."""
    from export.tf_saved_model import _tensor

    def varint(v: int) -> bytes:
        v &= (1 << 64) - 1
        out = bytearray()
        while True:
            byte, v = v & 0x7F, v >> 7
            out.append(byte | (0x80 if v else 0))
            if not v:
                return bytes(out)

    shape = b"\x12\x04\x12\x02\x08\x01"  # tensor_shape { dim { size: 1 } }
    for dtype, field, value in ((9, 10, -1), (3, 7, -3), (9, 10, -(1 << 63))):
        payload = varint(value)
        proto = bytes([8, dtype]) + shape + bytes([field << 3 | 2, len(payload)]) + payload
        assert _tensor(proto, "test").tolist() == [value]
    # float_val one fixed32 a value (unpacked), as well as packed
    unpacked = bytes([8, 1]) + shape + bytes([5 << 3 | 5]) + struct.pack("<f", 1.5)
    assert _tensor(unpacked, "test").tolist() == [1.5]


def test_a_flipped_bit_in_the_object_graph_is_refused(tmp_path):
    """The object graph names every variable: its bytes are checksummed like a tensor's,
    or one flipped bit could give one weight another's name and still convert."""
    prefix, entries, _ = read_index(FIXTURE / "weights")
    e = entries["_CHECKPOINTABLE_OBJECT_GRAPH"]
    copy = tmp_path / "weights"
    shutil.copytree(FIXTURE / "weights", copy)
    data = copy / "ckpt.data-00000-of-00001"
    raw = bytearray(data.read_bytes())
    raw[e.offset + e.size - 100] ^= 0x04  # inside the graph's bytes, past the lengths
    data.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="_CHECKPOINTABLE_OBJECT_GRAPH: its bytes fail"):
        named_variables(copy)


def test_an_optimizers_lists_are_not_layer_paths():
    """A Keras 3 optimizer saved under any name reaches the weights first through its
    ``_trainable_variables`` list; the layer path must win."""
    from export.tf_saved_model import ObjectNode, paths

    nodes = [
        ObjectNode(children={"opt": 1, "encoder": 2}),
        ObjectNode(children={"_trainable_variables": 3}),
        ObjectNode(children={"embedding": 4}),
        ObjectNode(children={"0": 5}),
        ObjectNode(children={"embeddings": 5}),
        ObjectNode(attributes={"VARIABLE_VALUE": "key"}),
    ]
    assert paths(nodes)[5] == "encoder/embedding/embeddings"


def test_two_translators_in_one_save_are_refused():
    from export.keras_text import _model_root

    one = {"model/encoder/embedding/embeddings": 1, "aux_encoder/embedding/embeddings": 2}
    assert _model_root(one) == "model/"  # a name that merely ends so is not a root
    with pytest.raises(KerasError, match="2 Translators"):
        _model_root({"a/encoder/embedding/embeddings": 1, "b/encoder/embedding/embeddings": 2})


def test_an_encoder_of_concatenated_directions_translates_as_tensorflow_did(tmp_path):
    """Keras' default ``Bidirectional(merge_mode="concat")`` in place of the tutorial's
    ``"sum"`` (``text_tutorial_concat``, made by make_text_tutorial.py with
    MERGE_MODE=concat): told by the attention's key weights, which read both directions.
    TensorFlow's own ``translate`` on 330 sources, less the 2 where it picked ``[START]``,
    which the bundle never emits. (It converted before 2026-11-30 only to fail in the
    gate: ``mat1 and mat2 shapes cannot be multiplied``.)"""
    concat = FIXTURE.parent / "text_tutorial_concat"
    out = tmp_path / "m" / "1"
    assert main([*_argv(concat, out), "--parity-limit", "30", "--beam-sentences", "5"]) == 0
    bundle = _bundle(out)
    rows = [json.loads(x) for x in (concat / "greedy.json").read_text().splitlines()]
    sources = [bundle.src_tokenizer.encode(r["source"]) for r in rows]
    assert sources == [r["context_ids"] for r in rows]
    got = decode(bundle.model, sources, options=bundle.decoding, special=bundle.special)
    eos, bos = bundle.special.eos, bundle.special.bos
    same = [
        list(h.tokens) + [eos] * r["ended"] == r["ids"] for (h,), r in zip(got, rows, strict=True)
    ]
    started = [bos in r["ids"] for r in rows]
    assert sum(same) == 328 and all(s or b for s, b in zip(same, started, strict=True))

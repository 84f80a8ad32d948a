"""Nematus-format models (export/nematus.py) against Marian's outputs on them
(tests/fixtures/marian: ``amun`` and ``nematus_deep`` stored as Nematus stores a model,
decoded by Marian with their options as flags; ``amun_ln`` as Marian's trainer wrote it).
Their greedy and beam-5 lists are checked with the other Marian models in
test_marian.py; here: the options read off the weights, the same model with Marian's
``special:model.yml``, and what is refused."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from export.convert import main
from export.nematus import infer_options
from service.bundle import load_bundle
from service.loop import decode
from service.sessions import RuntimeConfig
from tests.export.test_marian import FIXTURE, MODELS, _decode, _marian, _set_option

SOURCES = MODELS["nematus_deep"]


def _model(tmp_path: Path, name: str = "nematus_deep") -> Path:
    model = tmp_path / "model"
    shutil.copytree(FIXTURE / name, model, ignore=shutil.ignore_patterns("greedy.json", "beam5*"))
    return model


def _arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as npz:
        return {k: npz[k] for k in npz.files}


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("amun", {"type": "amun", "enc-cell": "gru", "enc-cell-depth": 1,
                  "dec-cell-base-depth": 2, "layer-normalization": False,
                  "tied-embeddings": False}),
        ("nematus_deep", {"type": "nematus", "enc-cell": "gru-nematus", "enc-cell-depth": 2,
                          "dec-cell-base-depth": 3, "layer-normalization": True,
                          "tied-embeddings": True}),
    ],
)  # fmt: skip
def test_options_are_read_off_the_weights(name, want):
    """What Marian was given as flags to decode the fixture (its greedy.json's command)
    is what the converter reads off the weights and Nematus's config."""
    path = FIXTURE / name / "model.npz"
    options = infer_options(path, _arrays(path))
    assert {k: options[k] for k in want} == want
    dictionaries = json.loads((FIXTURE / name / "model.npz.json").read_text())["dictionaries"]
    assert options["vocabs"] == dictionaries == ["vocab.en.json", "vocab.es.json"]
    sizes = [len(json.loads((FIXTURE / name / v).read_text())) for v in dictionaries]
    assert options["dim-vocabs"] == sizes
    # the flags Marian was given (its defaults where none): the options read, where
    # Marian's amun cells are its GRU
    command = json.loads((FIXTURE / name / "greedy.json").read_text())["command"]
    given = MARIAN_DEFAULTS | {
        key: value for key in MARIAN_DEFAULTS
        if (value := _flag(command, key.replace("-", "_"))) is not None
    }  # fmt: skip
    assert given == {k: options[k] for k in MARIAN_DEFAULTS}


# Marian's defaults for the flags a Nematus-form model's decoding takes
MARIAN_DEFAULTS = {"enc-cell": "gru", "enc-cell-depth": 1, "dec-cell-base-depth": 2,
                   "layer-normalization": False, "tied-embeddings": False}  # fmt: skip


def _flag(command: str, name: str):
    """The value of ``name=...`` in a recorded ``pymarian.Translator(...)`` call."""
    for part in command.split("(", 1)[1].rstrip(")").split(", "):
        key, _, value = part.partition("=")
        if key == name:
            return ast.literal_eval(value)
    return None


def test_the_same_weights_with_marians_options_decode_the_same(tmp_path):
    """``nematus_deep`` as Marian's trainer writes a ``--type nematus`` model (its options
    in ``special:model.yml``): the converter takes them from there and gives Marian's
    translations."""
    model = _model(tmp_path)
    (model / "model.npz.json").unlink()
    path = model / "model.npz"
    arrays = _arrays(path)
    options = infer_options(FIXTURE / "nematus_deep" / "model.npz", arrays)
    arrays["special:model.yml"] = np.frombuffer(yaml.safe_dump(options).encode(), np.int8)
    np.savez(path, **arrays)
    out = tmp_path / "o" / "1"
    assert main(["marian", str(path), "--out", str(out), "--parity-src", str(SOURCES),
                 "--parity-limit", "20", "--beam-sentences", "2"]) == 0  # fmt: skip
    got = [t for ((t, _),) in _decode(out, "nematus_deep", 1)]
    assert got == [w[0]["text"] for w in _marian("nematus_deep", "greedy")]


def test_nematus_untransposed_output_layer(tmp_path):
    """Nematus stores the output layer as ``ff_logit_W`` ``(dim_word, V)``, where Marian's
    trainer writes ``decoder_ff_logit_l2_Wt`` ``(V, dim_word)`` (Marian reads the first
    transposed, ``src/layers/output.cpp``): the same translations."""
    model = _model(tmp_path, "amun")
    path = model / "model.npz"
    arrays = _arrays(path)
    arrays["ff_logit_W"] = arrays.pop("decoder_ff_logit_l2_Wt").T.copy()
    np.savez(path, **arrays)
    out = tmp_path / "o" / "1"
    # (nmt-convert nematus: the same converter)
    assert main(["nematus", str(path), "--out", str(out), "--parity-src", str(SOURCES),
                 "--parity-limit", "20", "--beam-sentences", "2"]) == 0  # fmt: skip
    got = [t for ((t, _),) in _decode(out, "amun", 1)]
    assert got == [w[0]["text"] for w in _marian("amun", "greedy")]


def test_bpe_codes_take_the_text_before_bpe(tmp_path):
    """``--bpe-codes``: the bundle segments word-tokenised text as subword-nmt's apply-bpe
    did for Marian (the fixture's train.bpe.en) and undoes ``"@@ "``: Marian's n-best
    lists with their joins undone, the same scores."""
    out = tmp_path / "o" / "1"
    codes = FIXTURE.parent / "fairseq" / "data" / "bpe300.codes"
    words = FIXTURE.parent / "fairseq" / "data" / "train.en"
    assert main(["nematus", str(FIXTURE / "amun" / "model.npz"), "--bpe-codes", str(codes),
                 "--out", str(out), "--parity-src", str(words), "--parity-limit", "20",
                 "--beam-sentences", "2"]) == 0  # fmt: skip
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    lines = words.read_text(encoding="utf-8").splitlines()
    segmented = (FIXTURE / "amun" / "train.bpe.en").read_text(encoding="utf-8").splitlines()
    assert [bundle.src_tokenizer.pieces(bundle.src_tokenizer.encode(x))[:-1] for x in lines] == [
        x.split() for x in segmented
    ]
    options = dataclasses.replace(bundle.decoding, beam_size=5, n_best=5)
    sources = [bundle.src_tokenizer.encode(x) for x in lines]
    got = decode(bundle.model, sources, options=options, special=bundle.special)
    want = _marian("amun", "beam5")
    assert [[bundle.tgt_tokenizer.decode(h.tokens) for h in g] for g in got] == [
        [re.sub(r"@@( |$)", "", h["text"]) for h in w] for w in want
    ]
    assert max(abs(h.score - m["score"]) for g, w in zip(got, want, strict=True)
               for h, m in zip(g, w, strict=True)) < 1e-3  # fmt: skip
    assert sum("@@" in h["text"] for w in want for h in w) > 1000  # joins were undone


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--bpe-vocabulary-threshold", "5"], "--bpe-vocabulary / --bpe-vocabulary-threshold need"),
        (["--bpe-codes", "missing.codes"], "--bpe-codes: BPE codes missing.codes"),
    ],
)
def test_bpe_flags_refused_in_one_line(tmp_path, capsys, extra, message):
    argv = ["nematus", str(FIXTURE / "amun" / "model.npz"), "--out", str(tmp_path / "o"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("name", ["amun", "nematus_deep"])
def test_nematus_stores_vectors_1d(tmp_path, name):
    """Nematus (Theano, and TensorFlow's converted checkpoints) stores every bias and
    normalisation parameter 1-D, its bookkeeping (``decoder_c_tt`` ``zeros(1)``,
    ``uidx``, ``history_errs``) beside them; Marian makes the vectors ``(1, N)`` rows on
    load: so does the converter (Marian's translations)."""
    model = _model(tmp_path, name)
    path = model / "model.npz"
    arrays = {k: v.reshape(-1) if v.shape[0] == 1 else v for k, v in _arrays(path).items()}
    arrays |= {"decoder_c_tt": np.zeros(1, np.float32), "uidx": np.array(1234),
               "history_errs": np.zeros(0, np.float32)}  # fmt: skip
    assert sum(v.ndim == 1 for v in arrays.values()) > 10
    np.savez(path, **arrays)
    out = tmp_path / "o" / "1"
    assert main(["nematus", str(path), "--out", str(out), "--parity-src", str(MODELS[name]),
                 "--parity-limit", "20", "--beam-sentences", "2"]) == 0  # fmt: skip
    got = [t for ((t, _),) in _decode(out, name, 1)]
    assert got == [w[0]["text"] for w in _marian(name, "greedy")]


def test_nematus_dictionaries_read_text_as_marian_does(tmp_path):
    """Marian's reading of a Nematus dictionary (``DefaultVocab``, ``.json``): the word
    ``eos`` is id 0, EOS, wherever it stands in a sentence, ``</s>`` is no word of it
    (unknown), and unnamed ids 0 and 1 are EOS and UNK (Nematus's builder lets a corpus
    word ``eos`` take id 0's name away); the target's markers are named ``</s>``,
    ``<unk>`` in the bundle."""
    model = _model(tmp_path)
    vocab = model / "vocab.en.json"
    entries = json.loads(vocab.read_text())
    out = tmp_path / "o" / "1"
    flags = ["--parity-limit", "3", "--beam-sentences", "1"]
    assert main(["nematus", str(model / "model.npz"), "--out", str(out), *flags]) == 0
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    src = bundle.src_tokenizer
    assert src.encode("the eos </s>") == [entries["the"], 0, 1, 0]
    assert bundle.tgt_tokenizer.pieces([0, 1]) == ["</s>", "<unk>"]
    # the word "eos" took id 0's name: a word at id 30, id 0 unnamed
    entries["eos"], moved = 30, next(w for w, i in entries.items() if i == 30)
    del entries[moved]
    vocab.write_text(json.dumps(entries))
    again = tmp_path / "p" / "1"
    assert main(["nematus", str(model / "model.npz"), "--out", str(again), *flags]) == 0
    src = load_bundle(again, RuntimeConfig(providers=("cpu",), intra_op_threads=1)).src_tokenizer
    assert src.encode("the eos") == [entries["the"], 30, 0]
    assert src.encode(moved) == [1, 0]


def _config(key: str, value):
    def edit(model: Path) -> None:
        path = model / "model.npz.json"
        config = json.loads(path.read_text())
        path.write_text(json.dumps(config | {key: value}))

    return edit


def _weights(drop: str | None = None, add: str | None = None):
    def edit(model: Path) -> None:
        arrays = _arrays(model / "model.npz")
        arrays.pop(drop or "", None)
        if add:
            arrays[add] = np.ones((1, 40), np.float32)
        np.savez(model / "model.npz", **arrays)

    return edit


def _tf_dictionary(model: Path) -> None:
    """TensorFlow Nematus's build_dictionary.py: <EOS> 0, <GO> 1, <UNK> 2."""
    path = model / "vocab.en.json"
    words = [w for w in json.loads(path.read_text()) if w not in ("eos", "UNK")]
    entries = {"<EOS>": 0, "<GO>": 1, "<UNK>": 2} | {w: i + 3 for i, w in enumerate(words[:-1])}
    path.write_text(json.dumps(entries))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_config("model_type", "transformer"), "model_type 'transformer' is not supported"),
        (_config("dec_deep_context", True), "dec_deep_context True is not supported"),
        (_config("rnn_dec_deep_context", True), "rnn_dec_deep_context True is not supported"),
        (_config("output_hidden_activation", "relu"), "output_hidden_activation 'relu' is not"),
        (_config("factors", 2), "factors 2 is not supported"),
        (_config("enc_depth", 2), "enc_depth 2 is not supported"),
        (_config("softmax_mixture_size", 3), "softmax_mixture_size 3 is not supported"),
        (_config("n_words", 999), "n_words 999 disagrees with the model's weights (1186)"),
        (_config("n_words", "1186"), "n_words '1186' is not a whole number"),
        (_config("source_vocab_sizes", 1158.5), "source_vocab_sizes 1158.5 is not a whole"),
        (_config("dim", 41), "dim 41 disagrees with the model's weights (40)"),
        (_config("enc_recurrence_transition_depth", 1), "enc_recurrence_transition_depth 1 dis"),
        (_config("layer_normalisation", False), "layer_normalisation False disagrees"),
        (_config("tie_decoder_embeddings", False), "tie_decoder_embeddings False disagrees"),
        (_config("dictionaries", "vocab.en.json"), "dictionaries 'vocab.en.json' is not a list"),
        (lambda m: (m / "vocab.en.json").write_text('{"eos": 0,\n"UNK": 1,\n"a": [2'),
         "vocab.en.json: not a Marian vocabulary ("),
        (lambda m: (m / "model.npz.json").write_text("{"), "model.npz.json: not a Nematus config"),
        (_weights(add="encoder_2_U"), "stacked Nematus layers (encoder_2_U"),
        (_weights(drop="Wemb_dec"), "no Wemb_dec: tie_encoder_decoder_embeddings"),
        (_weights(add="Wemb1"), "Wemb1: factored input (factors > 1) is not supported"),
        (_weights(add="ff_state_gamma"), "ff_state_gamma is Marian's layer normalisation"),
        (_weights(drop="decoder_c_tt"), "holds no special:model.yml (nor Nematus's decoder_c_tt)"),
        (_weights(drop="decoder_U_nl_drt_1_lns"), "weight 'decoder_cell3_U_lns' missing"),
        (_weights(add="decoder_U_att"), "weights do not fit an s2s model: mat1 and mat2 shapes"),
        (_tf_dictionary, "starts ['<EOS>', '<GO>'], not Marian's </s> (0), <unk> (1) or Nematus's"),
    ],
    ids=["transformer", "deep-context", "deep-context-tf", "relu", "factors", "enc-depth",
         "mixture", "n-words", "n-words-str", "tf-sizes", "dim", "depth", "ln", "tied",
         "dictionaries-str", "dictionary-not-json", "not-json", "stacked", "tied-enc-dec",
         "factored", "gamma", "no-marker", "missing-weight", "misshapen-weight", "tf-dictionary"],
)  # fmt: skip
def test_what_the_bundle_cannot_read_is_refused_in_one_line(tmp_path, capsys, edit, message):
    model = _model(tmp_path)
    edit(model)
    out = tmp_path / "o" / "1"
    assert main(["marian", str(model / "model.npz"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("tied-embeddings-all", True, "--tied-embeddings-src/-all: True is not supported"),
        ("dec-cell-high-depth", 2, "--dec-cell-high-depth: 2 is not supported"),
        ("enc-cell", "gru", "--enc-cell: 'gru' is not supported (supported: gru-nematus"),
    ],
)
def test_marian_options_a_nematus_model_cannot_take(tmp_path, capsys, key, value, message):
    """``--type nematus`` options Marian's name map or ``GRUNematus`` cannot take, in the
    ``special:model.yml`` of a model Marian wrote."""
    model = tmp_path / "model"
    shutil.copytree(FIXTURE / "amun_ln", model)
    _set_option("type", "nematus")(model)
    _set_option("enc-cell", "gru-nematus")(model)
    _set_option("dec-cell", "gru-nematus")(model)
    _set_option(key, value)(model)
    assert main(["marian", str(model / "model.npz"), "--out", str(tmp_path / "o" / "1")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err

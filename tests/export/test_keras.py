"""TensorFlow's tutorial models (``tests/fixtures/keras``: trained, saved and decoded by
TensorFlow 2.15 itself; no tensorflow import here): checkpoint -> bundle -> the service's
decode loop and its gRPC server, against the tutorial's own ``evaluate`` and its own
teacher-forced log-probs."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from export.convert import main
from export.tf_checkpoint import CheckpointError, read_checkpoint, read_index
from export.tf_saved_model import named_variables
from service.bundle import load_bundle
from service.loop import decode
from service.sessions import RuntimeConfig
from tests.export.helpers import forced_score_errors, served_with_attention, write_tf_score_pairs

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "keras"
MODELS = ("tutorial", "oov", "feed")


def _hparams(name: str) -> dict:
    return json.loads((FIXTURE / name / "hparams.json").read_text())


def _lines(name: str, kind: str) -> list[dict]:
    text = (FIXTURE / name / f"{kind}.json").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def _argv(model: Path, out: Path, name: str, *extra: str) -> list[str]:
    hp = _hparams(name)
    return ["keras", str(model / "training_checkpoints"),
            "--source-tokenizer", str(model / "source_tokenizer.json"),
            "--target-tokenizer", str(model / "target_tokenizer.json"),
            "--max-source-length", str(hp["max_length_inp"]),
            "--max-target-length", str(hp["max_length_targ"]),
            "--out", str(out), *extra]  # fmt: skip


@pytest.fixture(scope="module", params=MODELS)
def converted(request, tmp_path_factory):
    name = request.param
    out = tmp_path_factory.mktemp("keras") / name / "1"
    src = FIXTURE.parents[1] / ".." / "models" / "sample" / "sample.en"
    assert main(_argv(FIXTURE / name, out, name, "--parity-src", str(src.resolve()),
                      "--beam-sentences", "20")) == 0  # fmt: skip
    return name, out


def _bundle(out: Path):
    return load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))


# -- the checkpoint reader, against TensorFlow's own list and values ---------------------


@pytest.mark.parametrize("name", MODELS)
def test_the_reader_lists_and_reads_what_tensorflow_does(name):
    ckpt = FIXTURE / name / "training_checkpoints"
    _, entries, shards = read_index(ckpt)
    truth = json.loads((FIXTURE / name / "variables.json").read_text())
    assert shards == 1 and len(truth) > 30  # the model's, Adam's slots, the object graph
    assert {n: list(e.shape) for n, e in entries.items()} == {v["name"]: v["shape"] for v in truth}
    dtypes = {
        n: "string" if e.dtype is None else np.dtype(e.dtype).name for n, e in entries.items()
    }
    assert dtypes == {v["name"]: v["dtype"] for v in truth}
    values = named_variables(ckpt)  # by layer path: the optimizer's and save_counter left out
    want = np.load(FIXTURE / name / "variable_values.npz")
    assert len(values) == len(want.files) == 16
    for key in want.files:
        name_ = key.replace("|", "/").removesuffix("/.ATTRIBUTES/VARIABLE_VALUE")
        assert np.array_equal(values[name_], want[key]), key


def test_the_reader_refuses_what_is_not_a_checkpoint(tmp_path):
    ckpt = FIXTURE / "tutorial" / "training_checkpoints"
    with pytest.raises(CheckpointError, match="no TensorFlow checkpoint here"):
        read_checkpoint(tmp_path)
    (tmp_path / "x.index").write_bytes(b"")
    with pytest.raises(CheckpointError, match="not a TensorFlow checkpoint index"):
        read_checkpoint(tmp_path / "x")
    (tmp_path / "x.index").write_bytes(b"\0" * 100)
    with pytest.raises(CheckpointError, match="no table magic"):
        read_checkpoint(tmp_path / "x.index")
    # a data shard cut short: every tensor past the cut is named, not read as garbage
    for f in ckpt.iterdir():
        shutil.copy(f, tmp_path / f.name)
    data = tmp_path / "ckpt-1.data-00000-of-00001"
    # one float's sign flipped: TensorFlow's get_tensor refuses it ("Checksum does not
    # match"), and so does this reader, naming the tensor
    whole = bytearray(data.read_bytes())
    whole[5003] ^= 0x80
    data.write_bytes(bytes(whole))
    with pytest.raises(CheckpointError, match="fail their checksum"):
        read_checkpoint(tmp_path)
    data.write_bytes(data.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="a truncated or mismatched checkpoint"):
        read_checkpoint(tmp_path)
    data.unlink()
    with pytest.raises(CheckpointError, match="not found"):
        read_checkpoint(tmp_path / "ckpt-1")


def test_a_corrupt_index_is_refused_with_the_reason_never_a_crash(tmp_path):
    """Bytes flipped or cut anywhere in an index: CheckpointError naming the file (each
    table block's CRC-32C is checked), never another exception, never other tensors."""
    ckpt = FIXTURE / "tutorial" / "training_checkpoints"
    for f in ckpt.iterdir():
        shutil.copy(f, tmp_path / f.name)
    good = (ckpt / "ckpt-1.index").read_bytes()
    want = read_index(ckpt)[1]
    rng = np.random.default_rng(0)
    refused = 0
    for trial in range(300):
        data = bytearray(good)
        if trial % 3 == 0:
            data = data[: int(rng.integers(0, len(data)))]
        else:
            for at in rng.integers(0, len(data), size=int(rng.integers(1, 4))):
                data[at] = int(rng.integers(0, 256))
        (tmp_path / "ckpt-1.index").write_bytes(bytes(data))
        try:
            got = read_index(tmp_path)[1]
        except CheckpointError as exc:
            assert "ckpt-1.index" in str(exc)
            refused += 1
        else:  # a flip in the footer's padding: nothing read changes
            assert got == want
    assert refused > 250


def test_the_paths_users_give_by_mistake_get_a_hint(tmp_path):
    ckpt = FIXTURE / "tutorial" / "training_checkpoints"
    assert len(read_checkpoint(ckpt / "checkpoint")) == len(read_checkpoint(ckpt))
    with pytest.raises(CheckpointError, match=r"saves of this prefix are ckpt-1: give one"):
        read_checkpoint(ckpt / "ckpt")  # the prefix given to save(), without its number
    with pytest.raises(CheckpointError, match=r"a Keras \.h5 file \(Keras 3.s save_weights writes"):
        read_checkpoint(tmp_path / "encoder.h5")


# -- the converted model, against the tutorial's evaluate() -------------------------------


def test_greedy_is_the_tutorials_token_for_token(converted):
    """Every source (the 300 trained on, new sentences, for ``oov`` sentences with
    unknown words) tokenised to the tutorial's padded ids, and translated to its tokens
    with its per-token log-probs; those that ran out of steps end as its loop does."""
    name, out = converted
    rows, same, gap = _greedy_against_tensorflow(name, out)
    assert sum(same) == len(rows) >= 320, [i for i, s in enumerate(same) if not s][:10]
    assert sum(not r["ended"] for r in rows) > 5  # the length limit was reached
    assert gap < 1e-4


def _greedy_against_tensorflow(name: str, out: Path) -> tuple[list[dict], list[bool], float]:
    """The bundle in ``out`` decoding fixture ``name``'s sources (their padded ids checked
    first), against the tutorial's ``evaluate``: its rows, whether each row's tokens are
    the tutorial's, and the largest per-token log-prob gap over the rows that are."""
    bundle = _bundle(out)
    rows = _lines(name, "greedy")
    sources = [bundle.src_tokenizer.encode(r["source"]) for r in rows]
    assert sources == [r["input_ids"] for r in rows]
    options = dataclasses.replace(bundle.decoding, return_token_scores=True)
    got = decode(bundle.model, sources, options=options, special=bundle.special)
    eos = bundle.special.eos
    same = [
        list(h.tokens) + [eos] * r["ended"] == r["ids"] for (h,), r in zip(got, rows, strict=True)
    ]
    gaps = [abs(g - w) for ((h,), r), ok in zip(zip(got, rows, strict=True), same, strict=True)
            if ok for g, w in zip(h.token_log_probs, r["log_probs"], strict=True)]  # fmt: skip
    return rows, same, max(gaps, default=float("inf"))


def test_scores_of_given_targets_are_tensorflows(converted, tmp_path):
    """``Score`` against the decoder's own teacher-forced log-probs (the tutorial's
    ``train_step`` convention): references and the model's own greedy outputs."""
    name, out = converted
    write_tf_score_pairs(_lines(name, "score"), tmp_path / "score.json")
    tokens, totals = forced_score_errors(out, tmp_path / "score.json")
    assert len(totals) >= 30 and len(tokens) > 300
    assert tokens.max() < 1e-4 and totals.max() < 1e-4


def test_manifest_records_the_tutorials_rules(converted):
    name, out = converted
    hp = _hparams(name)
    manifest = json.loads((out / "manifest.json").read_text())
    limit = hp["max_length_targ"] + 1  # our limit counts the EOS its loop does not
    assert manifest["decoding"] == {
        "max_length": limit, "max_length_ratio": 0.0, "max_length_offset": limit,
        "min_length": 0, "eos_at_limit": False,
    }  # fmt: skip
    source = manifest["tokenizers"]["source"]
    assert source["pad_to"] == hp["max_length_inp"] and source["pad_token"] == "<pad>"
    assert source["start_tokens"] == ["<start>"] and source["end_tokens"] == ["<end>"]
    # without an oov_token an unknown word is left out, as texts_to_sequences does
    assert source.get("unknown", "unk") == ("drop" if hp["oov_token"] is None else "unk")
    assert manifest["parity"]["greedy_mismatches"] == 0


def test_served_as_text_with_the_padding_attended(tmp_path_factory):
    """Through the real gRPC server: the tutorial's text (punctuation glued back on), its
    attention over the source's tokens and the padding its model attends to."""
    repo = tmp_path_factory.mktemp("keras-served")
    out = repo / "tutorial" / "1"
    assert main(_argv(FIXTURE / "tutorial", out, "tutorial", "--parity-limit", "20",
                      "--beam-sentences", "3")) == 0  # fmt: skip
    width = _hparams("tutorial")["max_length_inp"]
    rows = _lines("tutorial", "greedy")[:6]
    served = served_with_attention(repo, [r["source"] for r in rows])
    for r, (hyp, att) in zip(rows, served, strict=True):
        assert list(hyp.tokens) == [w for w in r["tokens"] if w != "<end>"]
        assert att.shape[1] == width == len(hyp.attention.source_tokens)
        assert hyp.attention.source_tokens[-1] == "<pad>"
        # the padding gets attention, as in the tutorial's attention_plot
        assert np.all(att[:, -1] > 0) and np.allclose(att.sum(1), 1.0, atol=1e-4)
        # one row a step the tutorial ran (a sentence stopped at the length limit
        # has one more here: the step whose EOS is not scored)
        want = np.array(r["attention"])
        assert att.shape[0] == len(want) + (not r["ended"])
        assert np.abs(att[: len(want)] - want).max() < 1e-4


# -- refusals -----------------------------------------------------------------------------


def _edit_tokenizer(side: str, key: str, value):
    def edit(model: Path) -> None:
        path = model / f"{side}_tokenizer.json"
        data = json.loads(path.read_text())
        data["config"][key] = value
        path.write_text(json.dumps(data))

    return edit


def _drop_words(model: Path) -> None:
    path = model / "source_tokenizer.json"
    data = json.loads(path.read_text())
    words = json.loads(data["config"]["index_word"])
    data["config"]["index_word"] = json.dumps({k: v for k, v in words.items() if int(k) < 100})
    path.write_text(json.dumps(data))


def _other_checkpoint(model: Path) -> None:
    ckpt = model / "training_checkpoints"
    shutil.rmtree(ckpt)
    shutil.copytree(FIXTURE / "oov" / "training_checkpoints", ckpt)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_edit_tokenizer("source", "num_words", 500), "source tokenizer: num_words=500 is not"),
        (_edit_tokenizer("target", "char_level", True), "target tokenizer: char_level=True is"),
        (_drop_words, "the source embeddings have"),
        (_other_checkpoint, "the source embeddings have"),
        (
            lambda m: shutil.copy(FIXTURE / "oov" / "source_tokenizer.json", m),
            "the source embeddings have 1130 rows but",  # one word more: all ids shifted
        ),
        (lambda m: (m / "target_tokenizer.json").write_text("{}"), "not a Keras Tokenizer"),
        (lambda m: shutil.rmtree(m / "training_checkpoints"), "training_checkpoints: not found"),
        (
            lambda m: (m / "training_checkpoints" / "ckpt-1.index").write_bytes(b"x" * 64),
            "not a TensorFlow checkpoint index",
        ),
    ],
    ids=["num-words", "char-level", "fewer-words", "other-checkpoint", "more-words",
         "not-tokenizer", "no-checkpoint", "not-index"],
)  # fmt: skip
def test_what_is_not_the_tutorials_is_refused_in_one_line(tmp_path, capsys, edit, message):
    model = tmp_path / "model"
    shutil.copytree(FIXTURE / "tutorial", model)
    edit(model)
    assert main(_argv(model, tmp_path / "o" / "1", "tutorial")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "o" / "1").exists()


def test_a_tokenizers_filters_remove_characters_as_keras_does(tmp_path):
    """Keras's ``text_to_word_sequence`` turns every character of ``filters`` into the
    split character after ``preprocess_sentence``; the bundle's tokenizer drops them too."""
    from export.keras import KerasVocabulary
    from tests.models.test_words import KERAS_TEXTS, _tensorflow_tutorial_preprocess

    data = json.loads((FIXTURE / "tutorial" / "source_tokenizer.json").read_text())
    data["config"]["filters"] = "?!,"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    rows = len(json.loads(data["config"]["index_word"])) + 1
    vocabulary = KerasVocabulary.read(path, "source", rows)
    # every word kept (this vocabulary drops unknown ones): the splitting alone
    tok = dataclasses.replace(vocabulary, own_unk=True).tokenizer(True, 0)
    for text in KERAS_TEXTS:
        seq = _tensorflow_tutorial_preprocess(text)
        want = "".join(" " if c in "?!," else c for c in seq).split()
        assert tok.surface(text) == (want if len(want) > 2 else []), text


def test_the_readme_command_converts_with_the_gates_own_sentences(tmp_path, capsys):
    """No --parity-src: the gate's random sentences, on which this looping model ends two
    beam hypotheses 1.5e-5 apart in an order the runtimes' rounding decides."""
    out = tmp_path / "o" / "1"
    assert main(_argv(FIXTURE / "tutorial", out, "tutorial")) == 0
    parity = json.loads((out / "manifest.json").read_text())["parity"]
    assert parity["greedy_mismatches"] == parity["beam_mismatches"] == 0
    assert parity["beam_sentences"] == 50 and parity["beam_near_ties"] >= 1
    assert "with hypotheses tied in score" in capsys.readouterr().out


def test_unknown_words_as_keras_reads_them(converted):
    """A source of unknown words alone is ``<start> <end>`` (what texts_to_sequences gives
    and the model translates); an unknown target word scores as the unknown token, about
    -1e4, not as nothing."""
    from nmt_api.nmt.v1 import translator_pb2 as pb
    from service.messages import to_score_options

    name, out = converted
    bundle = _bundle(out)
    ids = bundle.src_tokenizer.encode("Zzyzx qwfp")
    width, words = _hparams(name)["max_length_inp"], 0 if name == "tutorial" else 2
    assert len(ids) == width and ids[2 + words :] == [0] * (width - 2 - words)
    assert ids[1 : 1 + words] == [bundle.source_unk_id] * words
    (hyps,) = decode(bundle.model, [ids], options=bundle.decoding, special=bundle.special)
    assert hyps[0].tokens  # translated, not refused
    tgt, eos = bundle.tgt_tokenizer, bundle.special.eos
    target = tgt.encode("la zzyzx casa")
    assert len(target) == 3 and target[1] == bundle.config.unk_id
    options = to_score_options(pb.ScoreOptions(), max_length=64, defaults=bundle.decoding)
    src = bundle.src_tokenizer.encode(_lines(name, "greedy")[0]["source"])
    (scored,) = decode(bundle.model, [src], options=options, special=bundle.special,
                       prefixes=[(*target, eos)])  # fmt: skip
    if name == "tutorial":  # no oov_token: the unk the bundle adds, never likely
        assert scored[0].token_log_probs[1] < -5000
    else:  # the model's own <unk>: a word it learned
        assert -50 < scored[0].token_log_probs[1] < 0


def test_a_keras3_checkpoint_translates_as_tensorflow_did(tmp_path):
    """The tutorial's code run unchanged on TensorFlow 2.18, where ``tf.keras`` is Keras 3
    (``tutorial_keras3``): its checkpoint names the embeddings ``_embeddings`` and the
    kernels ``_kernel``, and keys most variables through the optimizer; converted, it
    gives TensorFlow's tokens and log-probs for all 60 sources kept, and Score gives its
    teacher-forced log-probs."""
    name = "tutorial_keras3"
    keys = read_index(FIXTURE / name / "training_checkpoints")[1]
    assert any("_trainable_variables" in k for k in keys) and any("_kernel" in k for k in keys)
    out = tmp_path / "k3" / "1"
    assert main(_argv(FIXTURE / name, out, name)) == 0
    rows, same, gap = _greedy_against_tensorflow(name, out)
    assert all(same) and len(rows) == 60
    assert gap < 1e-4
    write_tf_score_pairs(_lines(name, "score"), tmp_path / "score.json")
    tokens, totals = forced_score_errors(out, tmp_path / "score.json")
    assert len(totals) >= 30 and tokens.max() < 1e-4 and totals.max() < 1e-4


def test_an_lstm_is_named_as_one():
    from export.keras import KerasError, gru_weights

    units = 8
    w = {
        "encoder/gru/cell/kernel": np.zeros((4, 4 * units), np.float32),
        "encoder/gru/cell/recurrent_kernel": np.zeros((units, 4 * units), np.float32),
        "encoder/gru/cell/bias": np.zeros((4 * units,), np.float32),
    }
    with pytest.raises(KerasError, match="four gates of 8 units: an LSTM"):
        gru_weights(w, "encoder/gru/cell")


def test_a_decoder_fed_its_state_is_told_by_its_trained_recurrent_kernel():
    """The tutorial's decoder GRU starts each step from zeros, so its recurrent kernel
    never trains: it stays within glorot_uniform's bound (or orthonormal, Keras' default
    initializer); the ``feed`` fixture's (``self.gru(x, initial_state=hidden)``) left it."""
    from export.keras import fed_its_state
    from export.tf_saved_model import named_variables

    def kernel(name: str) -> np.ndarray:
        w = named_variables(FIXTURE / name / "training_checkpoints")
        return w["decoder/gru/cell/recurrent_kernel"]

    assert not fed_its_state(kernel("tutorial")) and not fed_its_state(kernel("oov"))
    assert fed_its_state(kernel("feed"))
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.normal(size=(3 * 16, 16)))
    assert not fed_its_state(q.T.astype(np.float32))  # orthogonal rows: untrained
    assert fed_its_state(rng.normal(size=(16, 48)).astype(np.float32))

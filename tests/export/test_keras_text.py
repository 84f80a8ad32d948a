"""TensorFlow's newer tutorial (TextVectorization, MultiHeadAttention), as
``tests/fixtures/keras/text_tutorial`` holds it (trained, saved and decoded by TensorFlow
2.15 + tensorflow-text itself; no tensorflow import here): ``model.save_weights`` ->
bundle -> the service's decode loop and its gRPC server, against the tutorial's own
``translate`` and teacher-forced log-probs."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from export.convert import main
from export.tf_checkpoint import read_checkpoint, read_index
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


def test_greedy_is_the_tutorials_token_for_token(converted):
    """All 330 sources (trained on, new, with unknown words) tokenised to the ids
    ``tf_lower_and_split_punct`` + TextVectorization gave, and translated to the tokens
    ``translate`` produced, with their log-probs."""
    bundle = _bundle(converted)
    rows = _lines("greedy")
    sources = [bundle.src_tokenizer.encode(r["source"]) for r in rows]
    assert sources == [r["context_ids"] for r in rows]
    assert sum(bundle.source_unk_id in s for s in sources) >= 10
    options = dataclasses.replace(bundle.decoding, return_token_scores=True)
    got = decode(bundle.model, sources, options=options, special=bundle.special)
    eos = bundle.special.eos
    same = [list(h.tokens) + [eos] == r["ids"] for (h,), r in zip(got, rows, strict=True)]
    assert sum(same) == len(rows) == 330, [i for i, s in enumerate(same) if not s][:10]
    gaps = [abs(g - w) for (h,), r in zip(got, rows, strict=True)
            for g, w in zip(h.token_log_probs, r["log_probs"], strict=True)]  # fmt: skip
    assert max(gaps) < 1e-4


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
        (
            lambda m: [shutil.rmtree(m / "weights"), shutil.copytree(
                FIXTURE / "saved_model", m / "weights")],
            "a SavedModel's variables are numbered, not named",
        ),
    ],
    ids=["not-list", "not-vocabulary", "other-vocabulary", "older-tutorial", "saved-model"],
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


def test_a_checkpoint_of_the_whole_model_is_read_by_the_translators_paths():
    """``tf.train.Checkpoint(model=model).save(...)`` (what the .h5 hint suggests): the
    Translator's weights under ``model/``, beside its optimizer and metrics."""
    from export.keras_text import _model_weights

    w = {"model/encoder/embedding/embeddings": 1, "model/optimizer/iter": 2,
         "model/keras_api/metrics/0/total": 3, "model/decoder/rnn/cell/bias": 4}  # fmt: skip
    assert _model_weights(w) == {"encoder/embedding/embeddings": 1, "decoder/rnn/cell/bias": 4}
    plain = {"encoder/embedding/embeddings": 1}
    assert _model_weights(plain) is plain
